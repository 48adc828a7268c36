"""`T.view(tile, shape=..., dtype=...)`: a shared tile's bytes named as another tile (TileLang's
sparse MLA backward stores float32 partial sums through a view of a bf16 K/V tile it has finished
with).  On the CPU target against torch; compiled for sm_80 and sm_90a (the view starts at the tile's
offset, and the tile's pointer loses __restrict__); the GPU runs are tests/gpu/test_view_shared_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

TARGETS = [{"kind": "cuda", "arch": "sm_80"}, {"kind": "cuda", "arch": "sm_90a"}]


def reinterpret(M=16, N=32):
    """B = A's int32 bits read as float32 through a view; C = the first half of them doubled,
    through a second view of another shape."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "int32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M // 2, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((M, N), "int32")
            f = T.view(s, dtype="float32")
            h = T.view(s, shape=(M // 2, N), dtype="float32")
            T.copy(A, s)
            T.copy(f, B)
            for i, j in T.Parallel(M // 2, N):
                h[i, j] = h[i, j] * 2.0
            T.copy(h, C)
    return main


def scratch_through_view(M=64, N=64, K=128, iters=3):
    """Out += A[it] @ B[it]^T for each it, the product leaving through a float32 view of the bf16
    B tile once the gemm has read it, as sparse_mla_bwd does (the next iteration's copy of B must
    wait for the view's last reader, the view's first write for the gemm's reads)."""
    @T.prim_func
    def main(A: T.Tensor((iters, M, K), "bfloat16"), B: T.Tensor((iters, N, K), "bfloat16"),
             Out: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "bfloat16")
            B_s = T.alloc_shared((N, K), "bfloat16")
            acc = T.alloc_fragment((M, N), "float32")
            part = T.view(B_s, shape=(M, N), dtype="float32")
            for it in T.Pipelined(iters, num_stages=1):
                T.copy(A[it, 0, 0], A_s)
                T.copy(B[it, 0, 0], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(M, N):
                    part[i, j] = acc[i, j]
                for i, j in T.Parallel(M, N):
                    T.atomic_add(Out[i, j], part[i, j])
    return main


def check_reinterpret(k, device="cpu"):
    a = torch.randint(-2 ** 30, 2 ** 30, (16, 32), dtype=torch.int32, device=device)
    b, c = k(a)
    assert torch.equal(b.view(torch.int32), a)       # bit for bit (NaN patterns included)
    torch.testing.assert_close(c, a.view(torch.float32)[:8] * 2, equal_nan=True)


def check_scratch(k, device="cpu", iters=3):
    a = torch.randn(iters, 64, 128, device=device).bfloat16()
    b = torch.randn(iters, 64, 128, device=device).bfloat16()
    out = torch.zeros(64, 64, device=device)
    k(a, b, out)
    ref = torch.einsum("imk,ink->mn", a.float(), b.float())
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-2)


def test_view_reinterprets_the_bytes_on_the_cpu_target():
    check_reinterpret(tilelang.compile(reinterpret(), out_idx=[1, 2], target="cpu"))


def test_partial_sums_leave_through_a_view_of_a_finished_tile_on_the_cpu_target():
    check_scratch(tilelang.compile(scratch_through_view(), target="cpu"))


@pytest.mark.cuda_compile
@pytest.mark.parametrize("target", TARGETS, ids=["sm_80", "sm_90a"])
def test_views_compile_for_cuda(target):
    for func, out_idx in [(reinterpret(), [1, 2]), (scratch_through_view(), None)]:
        k = tilelang.compile(func, out_idx=out_idx, target=target)
        src = k.get_kernel_source()
        views = [ln for ln in src.splitlines() if "// a view" in ln]
        assert views, src
        base = views[0].split("reinterpret_cast<")[1].split(">(")[1].split(")")[0]
        decl = next(ln for ln in src.splitlines() if f"* {base} = reinterpret_cast" in ln and "tc_smem" in ln)
        assert "__restrict__" not in decl, decl         # the two pointers alias


def test_a_view_larger_than_its_tile_is_refused():
    with pytest.raises(TilecraftError, match=r"the view needs 1024 bytes but s \(16, 16\) float16 has 512") as e:
        @T.prim_func
        def main(A: T.Tensor((16, 16), "float16")):
            with T.Kernel(1, threads=32) as bx:
                s = T.alloc_shared((16, 16), "float16")
                v = T.view(s, shape=(16, 16), dtype="float32")  # 1024 bytes of a 512-byte tile
                T.copy(A, s)
    assert "test_view_shared.py" in str(e.value)


def test_a_fragment_is_reshaped_not_reinterpreted():
    # a fragment view keeps the element type (tests/cpu/test_view_fragment.py reshapes one)
    with pytest.raises(TilecraftError, match=r"a register fragment can only be reshaped"):
        @T.prim_func
        def main(A: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=32) as bx:
                r = T.alloc_fragment((16, 16), "float32")
                v = T.view(r, dtype="int32")
                T.copy(A, r)


def test_a_view_of_a_staged_tile_is_refused_on_cuda():
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((32, 64), "float16")
            v = T.view(s, shape=(16, 64), dtype="float32")
            acc = T.alloc_fragment((16, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[k * 32, 0], s)
                for i, j in T.Parallel(16, 64):
                    acc[i, j] += v[i, j]
            T.copy(acc, B)
    with pytest.raises(TilecraftError, match=r"one copy of it per stage"):
        tilelang.compile(main, target={"kind": "cuda", "arch": "sm_80"})

"""`T.view(buffer, shape=..., dtype=...)`: a shared tile or global tensor's bytes seen with another
shape and element type.  On the CPU target (against torch's `Tensor.view(dtype)`): a float16 tile
read back as float32 bytes, a float16 tensor read as int16 / float32 through a global view, and a
bf16 gemm operand tile reused as a float32 staging tile after the gemm (TileLang's sparse MLA
backward does this).  CUDA compiles each for sm_80 and sm_90a; bad views are errors at the user's
line.  The GPU run is tests/gpu/test_view_reinterpret_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90a"}


def shared_bytes(M=16, N=64):
    """Out (M, N/2) float32 = the bytes of X (M, N) float16, through a view of a shared tile."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Out: T.Tensor((M, N // 2), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((M, N), "float16")
            T.copy(X, s)
            f = T.view(s, shape=[M, N // 2], dtype="float32")
            T.copy(f, Out)
    return main


def global_bytes(M=8, N=32):
    """Out1 (M, N) int16 and Out2 (M*N/2,) float32: the bytes of X (M, N) float16 through global views."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Out1: T.Tensor((M, N), "int16"),
             Out2: T.Tensor((M * N // 2,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            xi = T.view(X, dtype="int16")  # the shape defaults to X's
            xf = T.view(X, shape=[M * N // 2], dtype="float32")
            for i, j in T.Parallel(M, N):
                Out1[i, j] = xi[i, j]
            for i in T.Parallel(M * N // 2):
                Out2[i] = xf[i]
    return main


def gemm_then_stage(M=32, N=64, K=64, split=2):
    """C (M, N) float32 = A @ B^T (A (M, K), B (N, K) bf16); B's shared tile is reused after the gemm as
    a float32 staging tile of N/split rows, C written half by half through it (the sparse MLA backward's
    dKV store)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"), C: T.Tensor((N, M), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((M, K), "bfloat16")
            b_s = T.alloc_shared((N, K), "bfloat16")
            acc = T.alloc_fragment((N, M), "float32")
            stage = T.view(b_s, shape=[N // split, K], dtype="float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(b_s, a_s, acc, transpose_B=True, clear_accum=True)
            for s in range(split):
                for i, j in T.Parallel(N, M):
                    if i < N // split:
                        stage[i, j] = acc[i + s * (N // split), j]
                for i, j in T.Parallel(N // split, M):
                    C[i + s * (N // split), j] = stage[i, j]
    return main


def check_shared(k, device="cpu"):
    x = torch.randn(16, 64, device=device).half()
    torch.testing.assert_close(k(x), x.view(torch.float32), rtol=0, atol=0, equal_nan=True)


def check_global(k, device="cpu"):
    x = torch.randn(8, 32, device=device).half()
    o1, o2 = k(x)
    torch.testing.assert_close(o1, x.view(torch.int16), rtol=0, atol=0)
    torch.testing.assert_close(o2, x.view(torch.float32).reshape(-1), rtol=0, atol=0, equal_nan=True)


def check_stage(k, device="cpu"):
    a = torch.randn(32, 64, device=device).bfloat16()
    b = torch.randn(64, 64, device=device).bfloat16()
    torch.testing.assert_close(k(a, b), b.float() @ a.float().t(), rtol=1e-3, atol=1e-3)


def test_views_on_the_cpu_target():
    check_shared(tilelang.compile(shared_bytes(), out_idx=[1], target="cpu"))
    check_global(tilelang.compile(global_bytes(), out_idx=[1, 2], target="cpu"))
    check_stage(tilelang.compile(gemm_then_stage(), out_idx=[2], target="cpu"))


@pytest.mark.cuda_compile
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90a"])
def test_views_compile_for_cuda(target):
    k = tilelang.compile(gemm_then_stage(), out_idx=[2], target=target)
    src = k.get_kernel_source()
    assert "float* stage = reinterpret_cast<float*>(" in src, "the staging view is a cast of its base's bytes"
    assert "* __restrict__ b_s" not in src, "a viewed base makes no __restrict__ promise"
    tilelang.compile(shared_bytes(), out_idx=[1], target=target)
    tilelang.compile(global_bytes(), out_idx=[1, 2], target=target)


def _bad(body):
    @T.prim_func
    def main(X: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, threads=64) as bx:
            s = T.alloc_shared((16, 16), "float16")
            f = T.alloc_fragment((16, 16), "float32")
            body(X, s, f)
    return main


@pytest.mark.parametrize("body,needle", [
    (lambda X, s, f: T.view(s, shape=[16, 16], dtype="float32"), "needs 1024 bytes"),
    (lambda X, s, f: T.view(s, dtype="float32"), "needs 1024 bytes but s (16, 16) float16 has 512"),
    (lambda X, s, f: T.view(f, dtype="float16"), "a register fragment can only be reshaped"),
    (lambda X, s, f: T.view(f, shape=[16, 8]), "a register fragment can only be reshaped"),
    (lambda X, s, f: T.view(X, shape=[16, 9], dtype="float32"), "needs 576 bytes"),
    (lambda X, s, f: T.view(s, shape=[16, 5], dtype="float64"), "needs 640 bytes"),
])
def test_bad_views_name_the_line(body, needle):
    with pytest.raises(TilecraftError) as e:
        tilelang.compile(_bad(body), target="cpu")
    assert needle in str(e.value) and "test_view_reinterpret.py" in str(e.value)

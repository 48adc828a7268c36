"""`T.reshape(frag, shape)` of a register fragment (TileLang's fp8 lightning indexer: the gemm
accumulator s[N, Q*H] read as s3[N, Q, H] to weight each head, then reduced over heads).  The view
holds the same elements row-major; on CUDA it names the accumulator's registers with its layout
reshaped (ir/layout/reshape.py).  On every target of tests/cpu/conftest.py against torch; the
thread-level CPU mode runs the CUDA lowering of the view (with default fragment layouts)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError
from tilecraft.ir.layout.fragment import default_layout, mma_accumulator_layout, wgmma_accumulator_layout
from tilecraft.ir.layout.reshape import reshape_layout
from tilecraft.ir.layout.fragment import _placement


@tilelang.jit(out_idx=[-1])
def head_weighted_logits(N=64, Q=2, H=8, D=32, threads=128):
    @T.prim_func
    def main(K: T.Tensor((N, D), "float16"), Qm: T.Tensor((Q * H, D), "float16"), W: T.Tensor((Q, H), "float32"),
             S: T.Tensor((N,), "float32"), Out: T.Tensor((Q, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            k_s = T.alloc_shared((N, D), "float16")
            q_s = T.alloc_shared((Q * H, D), "float16")
            s = T.alloc_fragment((N, Q * H), "float32")
            s3 = T.reshape(s, (N, Q, H))
            w = T.alloc_fragment((Q, H), "float32")
            sc = T.alloc_fragment((N,), "float32")
            lg = T.alloc_fragment((N, Q), "float32")
            T.copy(K, k_s)
            T.copy(Qm, q_s)
            T.copy(W, w)
            T.copy(S, sc)
            T.gemm(k_s, q_s, s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
            for i, q, h in T.Parallel(N, Q, H):
                s3[i, q, h] = T.max(s3[i, q, h], 0) * w[q, h] * sc[i]
            T.reduce_sum(s3, lg, dim=-1, clear=True)
            for q, i in T.Parallel(Q, N):
                Out[q, i] = lg[i, q]
    return main


@tilelang.jit(out_idx=[-1])
def flat_then_square(M=32, N=16, threads=64):
    """A fragment filled through a 1-D view, read back through a 2-D view of another shape."""
    @T.prim_func
    def main(A: T.Tensor((M * N,), "float32"), Out: T.Tensor((N, M), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            f = T.alloc_fragment((M, N), "float32")
            flat = T.view(f, shape=(M * N,))
            sq = T.reshape(f, (N, M))
            for e in T.Parallel(M * N):
                flat[e] = A[e] * 2.0
            for i, j in T.Parallel(N, M):
                Out[i, j] = sq[i, j] + 1.0
    return main


@tilelang.jit(out_idx=[-1])
def masked_single_query(N=64, H=8, D=32, lo=10, hi=50, threads=128):
    """DSA's block-sparse indexer with one query per block: logits is [N, 1] and a T.Parallel loop over
    N writes logits[i, 0] (the unit dimension indexed by a constant) where the key is masked."""
    @T.prim_func
    def main(K: T.Tensor((N, D), "float16"), Qm: T.Tensor((H, D), "float16"), W: T.Tensor((1, H), "float32"),
             Out: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            k_s = T.alloc_shared((N, D), "float16")
            q_s = T.alloc_shared((H, D), "float16")
            s = T.alloc_fragment((N, H), "float32")
            s3 = T.reshape(s, (N, 1, H))
            w = T.alloc_fragment((1, H), "float32")
            lg = T.alloc_fragment((N, 1), "float32")
            T.copy(K, k_s)
            T.copy(Qm, q_s)
            T.copy(W, w)
            T.gemm(k_s, q_s, s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
            for i, q, h in T.Parallel(N, 1, H):
                s3[i, q, h] = T.max(s3[i, q, h], 0) * w[q, h]
            T.reduce_sum(s3, lg, dim=-1, clear=True)
            for i in T.Parallel(N):
                if i < lo or i >= hi:
                    lg[i, 0] = -T.infinity("float32")
            for i in T.Parallel(N):
                Out[i] = lg[i, 0]
    return main


def _inputs(N=64, Q=2, H=8, D=32, device="cpu"):
    g = torch.Generator().manual_seed(7)
    k = torch.randn(N, D, generator=g).half()
    q = torch.randn(Q * H, D, generator=g).half()
    w = torch.randn(Q, H, generator=g)
    s = torch.rand(N, generator=g)
    ref = ((k.float() @ q.float().T).view(N, Q, H).relu() * w[None] * s[:, None, None]).sum(-1).T
    return [t.to(device) for t in (k, q, w, s)], ref.to(device)


def test_a_reshaped_accumulator_is_weighted_and_reduced(build, device):
    args, ref = _inputs(device=device)
    torch.testing.assert_close(build(head_weighted_logits)(*args), ref, rtol=1e-4, atol=1e-4)


def test_views_of_one_fragment_share_its_elements(build, device):
    a = torch.randn(32 * 16, device=device)
    torch.testing.assert_close(build(flat_then_square)(a), (a * 2 + 1).view(16, 32))


def _masked_ref(device="cpu"):
    g = torch.Generator().manual_seed(3)
    k, q, w = torch.randn(64, 32, generator=g).half(), torch.randn(8, 32, generator=g).half(), torch.randn(1, 8, generator=g)
    ref = ((k.float() @ q.float().T).relu() * w).sum(-1)
    ref[:10] = ref[50:] = float("-inf")
    return [t.to(device) for t in (k, q, w)], ref.to(device)


def test_a_unit_dimension_indexed_by_a_constant(build, device):
    args, ref = _masked_ref(device)
    torch.testing.assert_close(build(masked_single_query)(*args), ref, rtol=1e-4, atol=1e-4)


def test_the_cuda_lowering_of_a_view_on_the_cpu_threads():
    """The CPU target's thread-level mode lowers as for CUDA (per-thread registers, the view's
    layout reshaped from its base's, reductions over lanes)."""
    args, ref = _inputs()
    f = head_weighted_logits.fn()
    k = tilelang.compile(f, out_idx=[-1], target="cpu", pass_configs={"tc.cpu_threads": True})
    torch.testing.assert_close(k(*args), ref, rtol=1e-4, atol=1e-4)
    a = torch.randn(32 * 16)
    k2 = tilelang.compile(flat_then_square.fn(), out_idx=[-1], target="cpu", pass_configs={"tc.cpu_threads": True})
    torch.testing.assert_close(k2(a), (a * 2 + 1).view(16, 32))
    args, ref = _masked_ref()
    k3 = tilelang.compile(masked_single_query.fn(), out_idx=[-1], target="cpu", pass_configs={"tc.cpu_threads": True})
    torch.testing.assert_close(k3(*args), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lay,shape", [
    (mma_accumulator_layout((256, 128), 512, 1, 16), (256, 4, 32)),
    (mma_accumulator_layout((64, 16), 128, 4, 1), (8, 8, 16)),
    (wgmma_accumulator_layout((256, 128), 512), (256, 2, 64)),
    (default_layout((64, 64), 128, 4), (4096,)),
])
def test_a_reshaped_layout_keeps_every_register(lay, shape):
    """Slot for slot and thread for thread, the view's element is the base's, row-major."""
    out = reshape_layout(lay, shape)
    assert out is not None and out.num_regs == lay.num_regs and out.threads == lay.threads
    bs = [1] * len(lay.shape)
    for d in range(len(lay.shape) - 2, -1, -1):
        bs[d] = bs[d + 1] * lay.shape[d + 1]
    vs = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        vs[d] = vs[d + 1] * shape[d + 1]
    for b, v in zip(_placement(lay), _placement(out)):
        assert sum(x * s for x, s in zip(b, bs)) == sum(x * s for x, s in zip(v, vs))


def test_a_layout_that_cannot_be_reshaped_is_refused():
    # three warps along M: the warp digit's flat coefficient (256) is no multiple of the view's row (48)
    assert reshape_layout(mma_accumulator_layout((48, 16), 96, 3, 1), (16, 3, 16)) is None


def test_a_fragment_reshaped_to_fewer_elements_is_refused_at_its_line():
    with pytest.raises(TilecraftError, match=r"a register fragment can only be reshaped") as e:
        @T.prim_func
        def main(A: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=32) as bx:
                r = T.alloc_fragment((16, 16), "float32")
                v = T.reshape(r, (16, 8))
                T.copy(A, r)
    assert "test_view_fragment.py" in str(e.value)

"""Reductions whose destination is a shared tile (DeepSeek mHC's sinkhorn backward: a fragment
reduced into a shared [tile, n] vector, a shared tile into another, clear=False folding into the old
values).  On every target of tests/cpu/conftest.py against torch; on CUDA the reduction goes through
a fragment (transform/stage_reduce_destinations.py), which the thread-level CPU mode runs here."""
from __future__ import annotations

import torch

import tilecraft as tilelang
import tilecraft.language as T


@tilelang.jit(out_idx=[1, 2])
def row_and_column_sums(TS=4, N=16, threads=128):
    @T.prim_func
    def main(X: T.Tensor((TS, N, N), "float32"), Y1: T.Tensor((TS, N), "float32"), Y2: T.Tensor((TS, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            R = T.alloc_fragment((TS, N, N), "float32")
            b1 = T.alloc_shared((TS, N), "float32")
            b2 = T.alloc_shared((TS, N), "float32")
            buf = T.alloc_shared((TS, N, N), "float32")
            T.copy(X, R)
            T.reduce_sum(R, b1, dim=-1)                  # fragment -> shared
            for t, i, j in T.Parallel(TS, N, N):
                buf[t, i, j] = R[t, i, j] * 2.0
            T.fill(b2, 1.0)
            T.reduce_sum(buf, b2, dim=-2, clear=False)   # shared -> shared, folded into b2
            T.reduce_max(buf, b1, dim=-1, clear=False)   # and a max folded into the sums
            T.copy(b1, Y1)
            T.copy(b2, Y2)
    return main


def _ref(x):
    return torch.maximum(x.sum(-1), (2 * x).amax(-1)), 1 + 2 * x.sum(-2)


def test_reductions_into_shared_tiles(build, device):
    x = torch.randn(4, 16, 16, device=device)
    y1, y2 = build(row_and_column_sums)(x)
    r1, r2 = _ref(x)
    torch.testing.assert_close(y1, r1)
    torch.testing.assert_close(y2, r2)


def test_the_cuda_lowering_of_reductions_into_shared_tiles_on_the_cpu_threads():
    x = torch.randn(4, 16, 16)
    k = tilelang.compile(row_and_column_sums.fn(), out_idx=[1, 2], target="cpu", pass_configs={"tc.cpu_threads": True})
    y1, y2 = k(x)
    r1, r2 = _ref(x)
    torch.testing.assert_close(y1, r1)
    torch.testing.assert_close(y2, r2)

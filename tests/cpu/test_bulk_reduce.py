"""`T.atomic_add(G[rows, :], S)` of a shared tile into global memory, the form FlashAttention's backward
adds its dQ with.  On sm_90+ it lowers to one TMA bulk reduce-add per row (tests/cuda/
test_bulk_reduce_compile.py, tests/gpu/test_bulk_reduce_gpu.py); here the CPU target, the reference,
runs the same programs against torch: blocks adding into overlapping, ragged rows, the shared tile
rewritten and added again in a loop, the destination read back in the same kernel."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T

TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def scatter_add(B, R, N, bm, step, iters, dtype="float32", threads=128, read_back=False, strided=False):
    """Block b adds 2 * X[b, it] into Y[b * step + 3 * it :][:bm] for it < iters (rows past R dropped);
    read_back: afterwards every block also copies Y's first bm rows into Z (a read of the destination).
    Y is (R, N): the tile's rows are one contiguous run there (one bulk instruction per tile on sm_90);
    strided: Y is (R, 2, N) and the rows go to Y[:, 1, :], 2N elements apart (one instruction per row)."""
    y_shape = (R, 2, N) if strided else (R, N)

    @T.prim_func
    def main(X: T.Tensor((B, iters, bm, N), dtype), Y: T.Tensor(y_shape, dtype), Z: T.Tensor((B, bm, N), dtype)):
        with T.Kernel(B, threads=threads) as b:
            s = T.alloc_shared((bm, N), dtype)
            f = T.alloc_fragment((bm, N), dtype)
            for it in T.serial(iters):
                T.copy(X[b, it, :, :], f)
                for i, j in T.Parallel(bm, N):
                    f[i, j] = f[i, j] * 2
                T.copy(f, s)
                if strided:
                    T.atomic_add(Y[b * step + 3 * it:b * step + 3 * it + bm, 1, :], s)
                else:
                    T.atomic_add(Y[b * step + 3 * it:b * step + 3 * it + bm, :], s)
            if read_back:
                T.copy(Y[0:bm, :] if not strided else Y[0:bm, 1, :], Z[b, :, :])
    return main


def reference(x, y, step):
    y = y.clone().double()
    rows_of = y[:, 1] if y.dim() == 3 else y
    B, iters, bm, _ = x.shape
    for b in range(B):
        for it in range(iters):
            r0 = b * step + 3 * it
            rows = max(0, min(bm, y.shape[0] - r0))
            rows_of[r0:r0 + rows] += 2 * x[b, it, :rows].double()
    return y


def inputs(B, R, N, bm, iters, dtype, seed=0, strided=False):
    g = torch.Generator().manual_seed(seed)   # small integers: every sum exact in fp16 / bf16 / fp32
    x = torch.randint(-4, 5, (B, iters, bm, N), generator=g).to(TORCH[dtype])
    y = torch.randint(-4, 5, (R, 2, N) if strided else (R, N), generator=g).to(TORCH[dtype])
    return x, y


@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_shared_tiles_added_into_overlapping_ragged_rows(dtype, strided):
    B, R, N, bm, step, iters = 6, 120, 64, 32, 20, 3      # rows up to 5*20+6+31 = 137 >= 120: the last blocks are cut
    x, y = inputs(B, R, N, bm, iters, dtype, strided=strided)
    z = torch.zeros(B, bm, N, dtype=TORCH[dtype])
    k = tilelang.compile(scatter_add(B, R, N, bm, step, iters, dtype, strided=strided), target="cpu")
    want = reference(x, y, step)
    k(x, y, z)
    assert torch.equal(y.double(), want)


def dq_like_reference(a, b, R):
    y = torch.zeros(R, b.shape[1], dtype=torch.float64)
    for blk in range(a.shape[0]):
        rows = max(0, min(a.shape[1], R - 16 * blk))
        y[16 * blk:16 * blk + rows] += (a[blk].double() @ b.double())[:rows]
    return y


def test_gemm_accumulators_added_through_a_shared_tile():
    """The dQ shape of FlashAttention's backward (tests/cuda/test_bulk_reduce_compile.py::dq_like, TMA tensor reduces on sm_90): a gemm's
    accumulator staged in a shared tile and added into overlapping, ragged rows; small integers, exact sums."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
    from test_bulk_reduce_compile import dq_like
    g = torch.Generator().manual_seed(5)
    a = torch.randint(-3, 4, (4, 64, 64), generator=g).half()
    b = torch.randint(-3, 4, (64, 128), generator=g).half()
    y = torch.zeros(100, 128)
    tilelang.compile(dq_like(), target="cpu")(a, b, y, torch.zeros(64, 128))
    assert torch.equal(y.double(), dq_like_reference(a, b, 100))

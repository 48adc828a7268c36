"""GEMM tiles with fewer rows than 64 per warpgroup: on sm_90a the warpgroups split N instead of M
(wgmma, gemm_sm90.h's WGN; FlashAttention backward's 64-row dQ = dS K on two warpgroups).  The same
programs here on the CPU target, the reference, against torch: a pipelined k loop, B stored [K][N] or
[N][K], a row reduction and an elementwise epilogue over the accumulator (whose columns the split puts
in different warpgroups).  Compiled for sm_90a in tests/cuda/test_wgmma_split_n_compile.py; run on the
GPU in tests/gpu/test_wgmma_split_n_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def split_gemm(M, N, K, block_M=64, block_N=128, block_K=64, threads=256, trans_B=False, dtype="float16",
               stages=2):
    """C = A @ B (fp32), S[i] = sum_j C[i, j], D = relu(C) + 1 (fp16), one block per block_M x block_N tile."""
    b_shape = (N, K) if trans_B else (K, N)
    b_tile = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "float32"),
             S: T.Tensor((N // block_N, M), "float32"), D: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a = T.alloc_shared((block_M, block_K), dtype)
            b = T.alloc_shared(b_tile, dtype)
            c = T.alloc_fragment((block_M, block_N), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            d = T.alloc_fragment((block_M, block_N), dtype)
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, k * block_K], a)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], b)
                else:
                    T.copy(B[k * block_K, bx * block_N], b)
                T.gemm(a, b, c, transpose_B=trans_B)
            T.reduce_sum(c, s, dim=1)
            for i, j in T.Parallel(block_M, block_N):
                d[i, j] = T.max(c[i, j], 0) + 1
            T.copy(c, C[by * block_M, bx * block_N])
            T.copy(s, S[bx, by * block_M:(by + 1) * block_M])
            T.copy(d, D[by * block_M, bx * block_N])
    return main


def inputs(M, N, K, trans_B, dtype, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).to(TORCH[dtype])
    b = torch.randn(N, K, generator=g).to(TORCH[dtype])
    return a.to(device), (b if trans_B else b.t().contiguous()).to(device)


def check(kernel, M, N, K, block_N, trans_B, dtype, device="cpu"):
    a, b = inputs(M, N, K, trans_B, dtype, device)
    c = torch.zeros(M, N, device=device)
    s = torch.zeros(N // block_N, M, device=device)
    d = torch.zeros(M, N, dtype=TORCH[dtype], device=device)
    kernel(a, b, c, s, d)
    want = a.double() @ (b.double().t() if trans_B else b.double())
    assert torch.allclose(c.double(), want, atol=2e-2, rtol=1e-3), (c.double() - want).abs().max()
    rows = want.view(M, N // block_N, block_N).sum(-1).t()
    assert torch.allclose(s.double(), rows, atol=1e-1, rtol=1e-3), (s.double() - rows).abs().max()
    assert torch.allclose(d.double(), want.clamp(min=0) + 1, atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("trans_B", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_64_row_tile_over_two_warpgroups(trans_B, dtype):
    M, N, K = 128, 256, 192
    k = tilelang.compile(split_gemm(M, N, K, trans_B=trans_B, dtype=dtype), target="cpu")
    check(k, M, N, K, 128, trans_B, dtype)


def test_a_128_row_tile_over_four_warpgroups_splits_two_by_two():
    M, N, K = 128, 256, 128
    k = tilelang.compile(split_gemm(M, N, K, block_M=128, threads=512, trans_B=True), target="cpu")
    check(k, M, N, K, 128, True, "float16")

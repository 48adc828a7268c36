"""The CPU target's `T.gemm` computes the documented chain bit for bit (README "The CPU target"): each
C element is its products summed in k order in float32, each step a fused multiply-add rounded to
float32 (the chain the CUDA target's fallback gemm runs as FFMA); bf16 x bf16 tiles take blocks of 32 k,
each summed in two chains (even k, odd k) added to C together (TDPBF16PS's formula,
tilecraft_cpu_gemm_bf16.h).  Both CPU paths: the micro-kernel (tiles) and the scalar loops (an operand
straight from global memory, or both operands one tile).  Reference: `tilecraft.testing.gemm_order`
(float64 steps rounded to float32)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.testing.gemm_order import bf16_block_chain, k_order_chain


def gemm_kernel(M, N, K, in_dtype, trans_b):
    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K) if trans_b else (K, N), in_dtype),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((M, K), in_dtype)
            B_s = T.alloc_shared((N, K) if trans_b else (K, N), in_dtype)
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc, transpose_B=trans_b)
            T.copy(acc, C)
    return main


def chain(a, b, bf16=False):
    return bf16_block_chain(a, b) if bf16 else k_order_chain(a, b)


def self_product_kernel(N, K, in_dtype):
    """S @ S^T with both operands the same tile: the scalar loops, not the micro-kernel (which wants three
    distinct buffers)"""
    @T.prim_func
    def main(A: T.Tensor((N, K), in_dtype), C: T.Tensor((N, N), "float32")):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((N, K), in_dtype)
            acc = T.alloc_fragment((N, N), "float32")
            T.copy(A, S)
            T.clear(acc)
            T.gemm(S, S, acc, transpose_B=True)
            T.copy(acc, C)
    return main


def inputs(shape, dtype, g):
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-6, 7, shape, generator=g).float())
    if dtype == "float8_e4m3fn":
        return x.clamp(-448, 448).to(torch.float8_e4m3fn)
    return x.to(getattr(torch, dtype))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8_e4m3fn", "float32"])
@pytest.mark.parametrize("M,N,K", [(64, 64, 128), (37, 50, 96), (4, 32, 64)])
@pytest.mark.parametrize("trans_b", [False, True])
def test_gemm_is_the_documented_chain_bit_for_bit(dtype, M, N, K, trans_b):
    g = torch.Generator().manual_seed(M * 1000 + N + K)
    a = inputs((M, K), dtype, g)
    b = inputs((N, K) if trans_b else (K, N), dtype, g)
    c = torch.empty(M, N)
    tilelang.compile(gemm_kernel(M, N, K, dtype, trans_b), target="cpu")(a, b, c)
    ref = chain(a, b.T if trans_b else b, bf16=dtype == "bfloat16")
    assert torch.equal(c, ref), (c - ref).abs().max()


@pytest.mark.parametrize("K", [40, 39])
@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16"])
def test_the_scalar_gemm_loops_are_the_same_chain(dtype, K):
    """bf16: the micro-kernel's block order here too (K = 40: a block of 32 and one of 8; 39: of 7)"""
    g = torch.Generator().manual_seed(11)
    a = inputs((24, K), dtype, g)
    c = torch.empty(24, 24)
    tilelang.compile(self_product_kernel(24, K, dtype), target="cpu")(a, c)
    ref = chain(a, a.T, bf16=dtype == "bfloat16")
    assert torch.equal(c, ref), (c - ref).abs().max()

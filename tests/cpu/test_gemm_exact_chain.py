"""The CPU target's `T.gemm` computes the documented chain bit for bit (README "The CPU target"): each
C element is its products summed in k order in float32, each step a fused multiply-add rounded to
float32 (the chain the CUDA target's fallback gemm runs as FFMA); bf16 x bf16 tiles take k in pairs,
the odd k of each first (vdpbf16ps's order, tilecraft_cpu_gemm_bf16.h).  Both CPU paths: the micro-kernel
(tiles) and the scalar loops (an operand straight from global memory).  Reference: the chain one k at
a time in float64, rounded to float32 after each step -- a * b is exact in float64 and a * b + c is
rounded twice there (to float64, then float32), which matches the one rounding except when the float64
result lands exactly on a float32 tie (about 2^-29 per step: not hit by these inputs)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


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


def chain(a, b, pairs=False):
    """sum over k in k order, each step a * b + c rounded once to float32; pairs: k in pairs, the odd k of
    each first (1, 0, 3, 2, ...), the order of a bf16 x bf16 gemm (tilecraft_cpu_gemm_bf16.h,
    tests/cpu/test_cpu_bf16_gemm.py)"""
    a, b = a.double(), b.double()
    c = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32)
    K = a.shape[1]
    order = [k ^ 1 if k ^ 1 < K else k for k in range(K)] if pairs else range(K)
    for k in order:
        c = (c.double() + a[:, k:k + 1] * b[k:k + 1, :]).float()
    return c


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
    ref = chain(a, b.T if trans_b else b, pairs=dtype == "bfloat16")
    assert torch.equal(c, ref), (c - ref).abs().max()


@pytest.mark.parametrize("K", [40, 39])
@pytest.mark.parametrize("dtype", ["float16", "float32", "bfloat16"])
def test_the_scalar_gemm_loops_are_the_same_chain(dtype, K):
    """bf16: the micro-kernel's pair order here too (an odd K's last k alone)"""
    g = torch.Generator().manual_seed(11)
    a = inputs((24, K), dtype, g)
    c = torch.empty(24, 24)
    tilelang.compile(self_product_kernel(24, K, dtype), target="cpu")(a, c)
    ref = chain(a, a.T, pairs=dtype == "bfloat16")
    assert torch.equal(c, ref), (c - ref).abs().max()

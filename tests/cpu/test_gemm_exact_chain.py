"""The CPU target's `T.gemm` computes the documented chain bit for bit (README "The CPU target"): each
C element is its products summed in k order in float32, every product and sum rounded to float32.
With 16- and 8-bit inputs the products are exact in float32, so the micro-kernel forms each step
with one fused multiply-add; the bits must not change.  Reference: the same chain in torch, one k
at a time (elementwise float32 ops, no fusion)."""
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


def chain(a, b):
    """sum over k in k order, float32, each product and sum rounded"""
    a, b = a.float(), b.float()
    c = torch.zeros(a.shape[0], b.shape[1])
    for k in range(a.shape[1]):
        c = c + a[:, k:k + 1] * b[k:k + 1, :]
    return c


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
    ref = chain(a, b.T if trans_b else b)
    assert torch.equal(c, ref), (c - ref).abs().max()

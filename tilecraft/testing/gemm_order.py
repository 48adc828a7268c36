"""The CPU target's documented `T.gemm` summation orders (README "The CPU target"), as torch reference
models for tests: each step computed in float64 and rounded to float32, which is the one rounding of the
float32 operation here -- a product of two 16-bit floats (or 8-bit) is exact in float64, and the float64
sum of two float32 values is either exact or so close to the larger one that it rounds to the same
float32 (the tie cases, about 2^-29 a step, are not hit by the tests' inputs)."""
from __future__ import annotations

import torch

BF16_BLOCK = 32  # k a block of the bf16 x bf16 order (tilecraft_cpu_gemm_bf16.h)


def k_order_chain(a, b, c0=None):
    """sum over k in k order from C (zeros when None), each step a * b + c rounded once to float32: every
    input type but bf16 x bf16"""
    a, b = a.double(), b.double()
    c = torch.zeros(a.shape[0], b.shape[1]) if c0 is None else c0.float()
    for k in range(a.shape[1]):
        c = (c.double() + a[:, k:k + 1] * b[k:k + 1, :]).float()
    return c


def bf16_block_chain(a, b, c0=None, call_k=None):
    """bf16 x bf16 into float32: per `T.gemm` call (slices of call_k k, all of K when None) and block of 32
    k of the call: the even k's products in one chain from +0, the odd k's in another, then
    acc = acc + (even + odd); C rounded to c0's dtype after each call (a bf16 accumulator)."""
    a, b = a.double(), b.double()
    out_t = torch.float32 if c0 is None else c0.dtype
    c = torch.zeros(a.shape[0], b.shape[1]) if c0 is None else c0.float()
    K = a.shape[1]
    call_k = call_k or K
    for k0 in range(0, K, call_k):
        k1 = min(k0 + call_k, K)
        for q in range(k0, k1, BF16_BLOCK):
            chains = []
            for first in (q, q + 1):
                s = torch.zeros_like(c)
                for k in range(first, min(q + BF16_BLOCK, k1), 2):
                    s = (s.double() + a[:, k:k + 1] * b[k:k + 1, :]).float()
                chains.append(s)
            c = (c.double() + (chains[0].double() + chains[1].double()).float().double()).float()
        c = c.to(out_t).float()
    return c.to(out_t)

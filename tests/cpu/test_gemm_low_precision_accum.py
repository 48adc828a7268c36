"""T.gemm into a float16 / bfloat16 accumulator on the CPU target: each T.gemm call accumulates its
products in float32 and rounds into the accumulator once (as the CUDA target's fallback does, and
as a tensor core rounds once per k16 instruction), never after every multiply-add.  TileLang's own
test of this shape (512 x 1024 x 768, block_K 32, tolerance 1e-2) failed with 12.75 % of the
elements off when the CPU target rounded per multiply-add."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


@tilelang.jit(out_idx=[-1])
def gemm_low_acc(M, N, K, bm, bn, bk, dtype, accum_dtype):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_f = T.alloc_fragment((bm, bn), accum_dtype)
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bm, bx * bn])
    return main


def test_tilelang_fp16_accumulator_gemm_within_1e_2_of_torch(build):
    kernel = build(gemm_low_acc, 512, 1024, 768, 128, 256, 32, "float16", "float16")
    kernel.get_profiler().assert_allclose(lambda A, B: (A.float() @ B.float()).half(), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype,tdtype", [("float16", torch.float16), ("bfloat16", torch.bfloat16)])
def test_low_precision_accumulator_rounds_once_per_gemm_call(build, device, dtype, tdtype):
    M, N, K, bk = 96, 80, 160, 32
    kernel = build(gemm_low_acc, M, N, K, 64, 64, bk, dtype, dtype)
    torch.manual_seed(7)
    a, b = torch.randn(M, K).to(tdtype), torch.randn(K, N).to(tdtype)
    c = kernel(a.to(device), b.to(device)).float().cpu()
    # the model: per T.gemm call (one k-tile of bk), float32 sums rounded once into the accumulator
    want = torch.zeros(M, N, dtype=tdtype)
    for k0 in range(0, K, bk):
        want = (want.float() + a[:, k0:k0 + bk].float() @ b[k0:k0 + bk].float()).to(tdtype)
    want = want.float()
    # torch sums the k-tile in another order: at most one rounding step of the accumulator apart
    ulp = torch.finfo(tdtype).eps * want.abs().clamp_min(torch.finfo(tdtype).tiny)
    assert ((c - want).abs() <= ulp + 1e-6).float().mean() > 0.99
    assert ((c - want).abs() <= 2 * ulp + 1e-6).all()
    # rounding after every multiply-add instead would be far off (the old CPU semantics)
    per_mac = torch.zeros(M, N, dtype=tdtype)
    for k in range(K):
        per_mac = (per_mac.float() + a[:, k:k + 1].float() * b[k:k + 1].float()).to(tdtype)
    assert (per_mac.float() - want).abs().max() > 4 * (c - want).abs().max()

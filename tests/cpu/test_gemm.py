"""T.gemm on every target (see conftest.py) against torch: all four transpose combinations, float16 /
bfloat16 / float32 inputs, operands from shared or fragment tiles, clear_accum, and a gemm into a
slice of a larger fragment.  Shapes are ragged against the tiles."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


def rand(shape, dtype="float32", device="cpu"):
    return torch.randn(shape).to({"float16": torch.float16, "bfloat16": torch.bfloat16,
                                  "float32": torch.float32}[dtype]).to(device)


# ---- T.gemm -------------------------------------------------------------------------------------

@tilelang.jit(out_idx=[-1])
def gemm_kernel(M, N, K, bm, bn, bk, trans_A, trans_B, dtype, a_mem="shared", b_mem="shared"):
    A_shape = (K, M) if trans_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    A_tile = (bk, bm) if trans_A else (bm, bk)
    B_tile = (bn, bk) if trans_B else (bk, bn)

    @T.prim_func
    def main(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            if a_mem == "shared":
                A_t = T.alloc_shared(A_tile, dtype)
            else:
                A_t = T.alloc_fragment(A_tile, dtype)
            if b_mem == "shared":
                B_t = T.alloc_shared(B_tile, dtype)
            else:
                B_t = T.alloc_fragment(B_tile, dtype)
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                if trans_A:
                    T.copy(A[ko * bk, by * bm], A_t)
                else:
                    T.copy(A[by * bm, ko * bk], A_t)
                if trans_B:
                    T.copy(B[bx * bn, ko * bk], B_t)
                else:
                    T.copy(B[ko * bk, bx * bn], B_t)
                T.gemm(A_t, B_t, C_f, transpose_A=trans_A, transpose_B=trans_B)
            T.copy(C_f, C[by * bm, bx * bn])
    return main


def test_gemm_float16_operands_every_finite_value(build, device):
    """Every finite float16 bit pattern (subnormals, both zeros) through T.gemm's float16 operand
    conversion (F16C on the CPU target, tilecraft_cpu_gemm.h) against an identity: exact."""
    h = torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16).view(torch.float16)
    h = h[torch.isfinite(h)]
    M, K = 64, 64
    n = (h.numel() + M * K - 1) // (M * K) * (M * K)
    a_all = torch.cat([h, torch.zeros(n - h.numel(), dtype=torch.float16)]).view(-1, M, K)
    eye = torch.eye(K, dtype=torch.float16).to(device)
    kern = build(gemm_kernel, M, K, K, M, K, K, False, False, "float16")
    for a in a_all:
        c = kern(a.contiguous().to(device), eye).cpu()
        assert torch.equal(c, a.float()), "a float16 operand changed through T.gemm"


def _gemm_check(build, device, M, N, K, tA, tB, dtype, a_mem="shared", b_mem="shared"):
    a = rand((K, M) if tA else (M, K), dtype, device)
    b = rand((N, K) if tB else (K, N), dtype, device)
    c = build(gemm_kernel, M, N, K, 16, 16, 8, tA, tB, dtype, a_mem, b_mem)(a, b)
    ref = (a.float().t() if tA else a.float()) @ (b.float().t() if tB else b.float())
    torch.testing.assert_close(c, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tA,tB", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gemm_transpose_combinations_and_dtypes(build, device, tA, tB, dtype):
    _gemm_check(build, device, 21, 35, 20, tA, tB, dtype)


@pytest.mark.parametrize("a_mem,b_mem", [("fragment", "shared"), ("shared", "fragment"), ("fragment", "fragment")])
def test_gemm_operands_from_fragments(build, device, a_mem, b_mem):
    # a 16x16x8 tile has no tensor-core path: on CUDA the fragment operands go through shared
    # memory (transform/stage_gemm_operands.py) and the scalar fallback reads them there
    _gemm_check(build, device, 21, 35, 20, False, True, "float16", a_mem, b_mem)


@tilelang.jit(out_idx=[-1])
def gemm_clear_accum(M, N, K, clear_accum):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            A_s = T.alloc_shared((M, K), "float32")
            B_s = T.alloc_shared((K, N), "float32")
            C_f = T.alloc_fragment((M, N), "float32")
            T.fill(C_f, 5.0)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f, clear_accum=clear_accum)
            T.copy(C_f, C)
    return main


@pytest.mark.parametrize("clear_accum", [True, False])
def test_gemm_clear_accum(build, device, clear_accum):
    a, b = rand((8, 12), device=device), rand((12, 16), device=device)
    c = build(gemm_clear_accum, 8, 16, 12, clear_accum)(a, b)
    torch.testing.assert_close(c, a @ b + (0.0 if clear_accum else 5.0), rtol=1e-5, atol=1e-4)


@tilelang.jit(out_idx=[-1])
def gemm_into_fragment_slice(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B0: T.Tensor((K, N), "float32"),
             B1: T.Tensor((K, N), "float32"), C: T.Tensor((M, 2 * N), "float32")):
        with T.Kernel(1) as bx:
            A_s = T.alloc_shared((M, K), "float32")
            B_s = T.alloc_shared((K, N), "float32")
            C_f = T.alloc_fragment((M, 2 * N), "float32")
            T.clear(C_f)
            T.copy(A, A_s)
            T.copy(B0, B_s)
            T.gemm(A_s, B_s, C_f[:, 0:N])
            T.copy(B1, B_s)
            T.gemm(A_s, B_s, C_f[:, N:2 * N])
            T.copy(C_f, C)
    return main


def test_gemm_into_slice_of_fragment(build, device):
    if build.rejects_on_cuda("a part of fragment C_f cannot be used", gemm_into_fragment_slice, 8, 6, 4):
        return  # CUDA refuses a gemm into part of a fragment instead of computing it wrongly
    a, b0, b1 = (rand(s, device=device) for s in [(8, 4), (4, 6), (4, 6)])
    c = build(gemm_into_fragment_slice, 8, 6, 4)(a, b0, b1)
    torch.testing.assert_close(c, torch.cat([a @ b0, a @ b1], dim=1), rtol=1e-5, atol=1e-5)


@tilelang.jit(out_idx=[-1])
def gemm_transposed_shared_slice(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((K, M), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            A_s = T.alloc_shared((K, 2 * M), "float32")
            B_s = T.alloc_shared((N, K), "float32")
            C_f = T.alloc_fragment((M, N), "float32")
            T.fill(A_s, 100.0)
            T.copy(A, A_s[:, M:2 * M])
            T.copy(B, B_s)
            T.gemm(A_s[:, M:2 * M], B_s, C_f, transpose_A=True, transpose_B=True, clear_accum=True)
            T.copy(C_f, C)
    return main


def test_gemm_operand_is_a_slice_of_a_shared_tile_transposed(build, device):
    a, b = rand((5, 4), device=device), rand((6, 5), device=device)
    c = build(gemm_transposed_shared_slice, 4, 6, 5)(a, b)
    torch.testing.assert_close(c, a.t() @ b.t(), rtol=1e-5, atol=1e-5)


@tilelang.jit(out_idx=[-1])
def gemm_local_and_int8(M, N, K, dtype, acc):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), acc)):
        with T.Kernel(1) as bx:
            A_l = T.alloc_local((M, K), dtype)
            B_s = T.alloc_shared((K, N), dtype)
            C_l = T.alloc_local((M, N), acc)
            T.copy(A, A_l)
            T.copy(B, B_s)
            T.gemm(A_l, B_s, C_l, clear_accum=True)
            T.copy(C_l, C)
    return main


_LOCAL_REFUSAL = "T.alloc_local buffer|accumulates into a T.alloc_fragment"


def test_gemm_with_local_operands_float32(build, device):
    if build.rejects_on_cuda(_LOCAL_REFUSAL, gemm_local_and_int8, 4, 6, 5, "float32", "float32"):
        return
    a, b = rand((4, 5), device=device), rand((5, 6), device=device)
    torch.testing.assert_close(build(gemm_local_and_int8, 4, 6, 5, "float32", "float32")(a, b), a @ b,
                               rtol=1e-5, atol=1e-5)


def test_gemm_int8_accumulates_exactly_in_int32(build, device):
    if build.rejects_on_cuda(_LOCAL_REFUSAL, gemm_local_and_int8, 4, 6, 40, "int8", "int32"):
        return
    a = torch.randint(-100, 100, (4, 40), dtype=torch.int8)
    b = torch.randint(-100, 100, (40, 6), dtype=torch.int8)
    c = build(gemm_local_and_int8, 4, 6, 40, "int8", "int32")(a.to(device), b.to(device))
    assert c.dtype == torch.int32 and torch.equal(c.cpu(), a.int() @ b.int())

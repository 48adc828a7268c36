"""transform/fuse_gemm_k_loops_cpu.py: a k-loop that only stages a gemm's operands runs as one gemm over the
whole k range on the CPU target, with the same bits as the loop it replaces.

Each case compiles the program twice -- with the CPU pipeline as it is, and with the pass left out -- and
compares the outputs bit for bit on data that makes the summation order show (values over 2^-20 .. 2^20,
2^-6 .. 2^6 in float16, random signs), checks from the generated source that the pass did (or did not) fuse, and checks the result
against torch.
"""
from __future__ import annotations

import re

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
import tilecraft.transform.pipeline as pipeline
from tilecraft import env
from tilecraft.transform.fuse_gemm_k_loops_cpu import fuse_gemm_k_loops_cpu


def gemm_program(M, N, K, bm, bn, bk, dtype, trans_a=False, trans_b=False, stages=2, read_after=False,
                 clear_each=False):
    a_shape, a_tile = ((K, M), (bk, bm)) if trans_a else ((M, K), (bm, bk))
    b_shape, b_tile = ((N, K), (bn, bk)) if trans_b else ((K, N), (bk, bn))

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared(a_tile, dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                if trans_a:
                    T.copy(A[ko * bk, by * bm], A_s)
                else:
                    T.copy(A[by * bm, ko * bk], A_s)
                if trans_b:
                    T.copy(B[bx * bn, ko * bk], B_s)
                else:
                    T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc, transpose_A=trans_a, transpose_B=trans_b, clear_accum=clear_each)
            if read_after:  # the staged tile's last contents are read after the loop: no fusion
                for i, j in T.Parallel(bm, bn):
                    acc[i, j] = acc[i, j] + T.cast(A_s[0, 0], "float32") * 0.0
            T.copy(acc, C[by * bm, bx * bn])
    return main


def both(prog):
    """(the kernel as the CPU pipeline compiles it, the kernel without fuse_gemm_k_loops_cpu: compiled past
    the disk cache, whose key does not name the pipeline)"""
    fused = tilelang.compile(prog, target="cpu")
    without = [p for p in pipeline.CPU_PIPELINE if p is not fuse_gemm_k_loops_cpu]
    saved = pipeline.CPU_PIPELINE
    pipeline.CPU_PIPELINE = without
    try:
        with env.override(disable_cache=True):
            plain = tilelang.compile(prog, target="cpu")
    finally:
        pipeline.CPU_PIPELINE = saved
    return fused, plain


def wide(shape, dtype, g):
    e = 6 if dtype == torch.float16 else 20   # float16 overflows past 2^16
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-e, e + 1, shape, generator=g).float())
    return x.to(dtype)


def gemm_calls(kernel) -> list:
    """The K extent of every micro-kernel call in the generated source."""
    return [int(k) for k in re.findall(r"tc::gemm_(?:bf16|f32acc)\(\d+, \d+, (\d+),", kernel.get_kernel_source())]


CASES = [  # M, N, K, bm, bn, bk, dtype, trans_a, trans_b, fused (the K of the fused call, or None)
    (256, 128, 256, 128, 64, 32, "bfloat16", False, False, 256),
    (128, 96, 192, 64, 32, 64, "bfloat16", False, True, 192),
    (96, 64, 128, 32, 64, 32, "bfloat16", True, False, 128),
    (128, 128, 160, 64, 64, 32, "float16", False, False, 160),
    (64, 128, 96, 64, 64, 16, "float32", True, True, 96),
    (200, 72, 128, 64, 32, 32, "bfloat16", False, False, 128),   # ragged M and N: edge blocks run the loop
    (128, 64, 100, 64, 64, 32, "bfloat16", False, False, 128),   # K % bk != 0: every block runs the loop
    (128, 64, 128, 64, 64, 16, "bfloat16", False, False, None),  # bk = 16 splits bf16's blocks of 32 k
]


@pytest.mark.parametrize("M,N,K,bm,bn,bk,dtype,trans_a,trans_b,fused_k", CASES)
def test_fused_loop_same_bits_as_the_loop(M, N, K, bm, bn, bk, dtype, trans_a, trans_b, fused_k):
    prog = gemm_program(M, N, K, bm, bn, bk, dtype, trans_a, trans_b)
    fused, plain = both(prog)
    assert fused_k is None or fused_k in gemm_calls(fused), gemm_calls(fused)
    assert max(gemm_calls(plain)) == bk
    if fused_k is None:
        assert max(gemm_calls(fused)) == bk
    g = torch.Generator().manual_seed(M * 31 + N * 7 + K)
    tdt = getattr(torch, dtype)
    a = wide((K, M) if trans_a else (M, K), tdt, g)
    b = wide((N, K) if trans_b else (K, N), tdt, g)
    c1, c2 = torch.empty(M, N), torch.empty(M, N)
    fused(a, b, c1)
    plain(a, b, c2)
    assert torch.equal(c1.view(torch.int32), c2.view(torch.int32))
    ref = (a.t() if trans_a else a).double() @ (b.t() if trans_b else b).double()
    scale = ((a.t() if trans_a else a).double().abs() @ (b.t() if trans_b else b).double().abs())
    assert ((c1.double() - ref).abs() <= 1e-5 * scale + 1e-30).all()


@pytest.mark.parametrize("kw", [dict(read_after=True), dict(clear_each=True)])
def test_no_fusion_where_the_loop_means_more(kw):
    """The staged tile read after the loop, or C cleared by every call: the loop stays."""
    M = N = K = 64
    prog = gemm_program(M, N, K, 32, 32, 32, "bfloat16", **kw)
    fused, plain = both(prog)
    assert gemm_calls(fused) == gemm_calls(plain) and max(gemm_calls(fused)) == 32
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(M, K, generator=g).bfloat16(), torch.randn(K, N, generator=g).bfloat16()
    c = torch.empty(M, N)
    fused(a, b, c)
    want = a.float()[:, 32:] @ b.float()[32:, :] if kw.get("clear_each") else a.float() @ b.float()
    torch.testing.assert_close(c, want, rtol=1e-5, atol=1e-4)

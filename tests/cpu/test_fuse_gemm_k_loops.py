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
    (128, 64, 100, 64, 64, 32, "bfloat16", False, False, None),  # K % bk != 0: never fits, the loop stays
    (128, 64, 128, 64, 64, 16, "bfloat16", False, False, None),  # bk = 16 splits bf16's blocks of 32 k
    (96, 64, 1536, 64, 32, 32, "float16", False, True, 512),     # float16 in calls of 512 k, ragged M
    (64, 64, 1536, 32, 64, 32, "bfloat16", True, False, 1536),   # bf16 in one call
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


# ---- packed operands kept for the launch (tilecraft_cpu_gemm_bf16.h, gemm_pack_cache) -------------------

def packs(kernel) -> list:
    """[operands packed, operands found packed by an earlier call of the launch] so far"""
    import ctypes
    return list((ctypes.c_longlong * 2).in_dll(kernel._launch.lib, "tc_gemm_bf16_packs"))




def test_a_launch_packs_each_strip_and_panel_once_and_a_new_launch_sees_new_data():
    """4 x 4 blocks of a bf16 GEMM: the blocks of a row share A's strip, those of a column B's panel.
    Where the AMX path runs (the only one that keeps packs), a launch packs fewer operands than it has
    calls x 2; either way the bits equal the unfused loop's, and a second launch after the inputs changed
    in place (same addresses) computes from the new values."""
    M = N = 256
    K = 128
    prog = gemm_program(M, N, K, 64, 64, 32, "bfloat16")
    fused, plain = both(prog)
    assert "tc_launch" in fused.get_kernel_source() and "tc_launch" not in plain.get_kernel_source()
    g = torch.Generator().manual_seed(11)
    a, b = wide((M, K), torch.bfloat16, g), wide((K, N), torch.bfloat16, g)
    from tilecraft.runtime.openmp import configure
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # one thread runs every block: its packs of one launch meet the next launch's calls
    configure(fused._launch.lib)   # a loaded kernel takes torch's thread count when configured
    try:
        _launches(fused, plain, a, b, g, M, N, K)
    finally:
        torch.set_num_threads(threads)
        configure(fused._launch.lib)


def _launches(fused, plain, a, b, g, M, N, K):
    for step in range(3):
        c1, c2 = torch.empty(M, N), torch.empty(M, N)
        before = packs(fused)
        fused(a, b, c1)
        after = packs(fused)
        plain(a, b, c2)
        assert torch.equal(c1.view(torch.int32), c2.view(torch.int32)), step
        packed, found = after[0] - before[0], after[1] - before[1]
        amx_calls = packed + found
        if amx_calls:   # the AMX path ran: 16 calls, 2 operands each; 4 strips and 4 panels per thread at most
            assert amx_calls == 32 and found > 0 and packed <= 8, (packed, found)
        a.copy_(wide((M, K), torch.bfloat16, g))   # new values at the same address
        b.mul_(-2)


def test_no_packs_kept_where_an_operand_shares_bytes_with_a_written_tensor():
    """A lies inside the bytes of D, which the program writes (only D[0], before A's bytes; but a write
    through D could change A during the launch): the launch keeps nothing (tc_launch = 0), and the
    result is the loop's."""
    M = N = K = 128
    L = M * K // 2 + 1

    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "bfloat16"), C: T.Tensor((M, N), "float32"),
             D: T.Tensor((L,), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "bfloat16")
            B_s = T.alloc_shared((32, 64), "bfloat16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for ko in T.Pipelined(K // 32):
                T.copy(A[by * 64, ko * 32], A_s)
                T.copy(B[ko * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * 64, bx * 64])
            if bx == 0 and by == 0:
                D[0] = 1.0

    fused = tilelang.compile(main, target="cpu")
    assert "tc_launch" in fused.get_kernel_source()
    g = torch.Generator().manual_seed(3)
    a, b = wide((M, K), torch.bfloat16, g), wide((K, N), torch.bfloat16, g)
    store = torch.zeros(L)
    a_inside = store.view(torch.bfloat16)[2: 2 + M * K].view(M, K)   # bytes 4 .. 4 + 2MK of D
    a_inside.copy_(a)
    c, c_apart = torch.empty(M, N), torch.empty(M, N)
    before = packs(fused)
    fused(a_inside, b, c, store)
    after = packs(fused)
    assert after[1] == before[1]   # nothing found packed: nothing kept
    fused(a, b, c_apart, torch.zeros(L))   # apart: kept (where the AMX path runs), the same bits
    assert torch.equal(c.view(torch.int32), c_apart.view(torch.int32)) and store[0] == 1.0


def test_an_operand_the_program_writes_is_not_kept():
    M = N = K = 64

    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "bfloat16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 32), "bfloat16")
            B_s = T.alloc_shared((32, 32), "bfloat16")
            acc = T.alloc_fragment((32, 32), "float32")
            T.clear(acc)
            for ko in T.Pipelined(2):
                T.copy(A[by * 32, ko * 32], A_s)
                T.copy(B[ko * 32, bx * 32], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * 32, bx * 32])
            if bx == 1:
                A[by * 32, 0] = T.cast(0.0, "bfloat16")   # the program writes A

    fused = tilelang.compile(main, target="cpu")
    src = fused.get_kernel_source()
    assert re.search(r"tc::gemm_bf16\(32, 32, 64,", src) and "tc_launch" not in src

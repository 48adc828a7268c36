"""TileLang's Blackwell tensor memory and tcgen05 MMA (language/tcgen05.py, ir/blackwell.py) on every
target (conftest.py): the CPU target executes them and must match torch; a CUDA target (sm_90a for
cuda-compile, the local GPU for cuda) refuses them at the user's line naming sm_100.

Shapes after TileLang's gemm_tcgen05/gemm_tcgen5mma.py (T.alloc_tmem accumulator, clear_accum=k == 0,
the commit arriving on an mbarrier the loop waits on) and flash_attention_sm100 (a fragment
accumulator, no mbarrier; a bf16 tensor-memory A operand)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM100 = "sm_100"


@tilelang.jit(out_idx=[2])
def tmem_gemm(M, N, K, bm, bn, bk, dtype="bfloat16", stages=2, commit="gemm"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bn, bk), dtype)
            C_tmem = T.alloc_tmem([bm, bn], "float32")
            mbar = T.alloc_barrier(1)
            C_f = T.alloc_fragment((bm, bn), "float32")
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                if commit == "gemm":
                    T.tcgen05_gemm(A_s, B_s, C_tmem, False, True, mbar=mbar, clear_accum=k == 0)
                else:
                    T.tcgen05_gemm(A_s, B_s, C_tmem, transpose_B=True, mbar=None, clear_accum=k == 0)
                    T.tcgen05_mma_arrive(mbar)
                T.mbarrier_wait_parity(mbar, k % 2)
            T.copy(C_tmem, C_f)
            T.copy(C_f, C[by * bm, bx * bn])
    return main


@tilelang.jit(out_idx=[2])
def tmem_zero_start(M, N, K, bm, bn, bk):
    """clear_accum left False: the accumulator must start from what the program put there."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bn, bk), "float16")
            C_tmem = T.alloc_tmem([bm, bn], "float32")
            C_f = T.alloc_fragment((bm, bn), "float32")
            for i, j in T.Parallel(bm, bn):
                C_f[i, j] = 1.0
            T.copy(C_f, C_tmem)
            for k in T.serial(T.ceildiv(K, bk)):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.tcgen05_gemm(A_s, B_s, C_tmem, transpose_B=True)
            T.copy(C_tmem, C_f)
            T.copy(C_f, C[by * bm, bx * bn])
    return main


@tilelang.jit(out_idx=[2])
def staged_tmem(M, N, K, bm, bn, bk):
    """Two accumulators in one (2, bm, bn) tensor-memory buffer (TileLang's persistent tcgen05 gemms):
    even k-tiles accumulate into stage 0, odd ones into stage 1; C is their sum."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bn, bk), "float16")
            acc = T.alloc_tmem([2, bm, bn], "float32")
            bars = T.alloc_barrier([1, 1])
            C_f = T.alloc_fragment((bm, bn), "float32")
            D_f = T.alloc_fragment((bm, bn), "float32")
            for k in T.serial(T.ceildiv(K, bk)):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.tcgen05_gemm(A_s, B_s, acc[k % 2, :, :], transpose_B=True, mbar=bars[k % 2], clear_accum=k < 2)
                T.mbarrier_wait_parity(bars[k % 2], (k // 2) % 2)
            T.copy(acc[0, :, :], C_f)
            T.copy(acc[1, :, :], D_f)
            for i, j in T.Parallel(bm, bn):
                C_f[i, j] += D_f[i, j]
            T.copy(C_f, C[by * bm, bx * bn])
    return main


def test_staged_tensor_memory(build, device):
    M, N, K = 64, 64, 256
    if build.rejects_on_cuda(SM100, staged_tmem, M, N, K, 64, 64, 32):
        return
    k = build(staged_tmem, M, N, K, 64, 64, 32)
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(N, K, dtype=torch.float16, device=device)
    torch.testing.assert_close(k(a, b), _ref(a, b), rtol=1e-3, atol=1e-3)


@tilelang.jit(out_idx=[3])
def attention_like(M, N, D, bm, bn):
    """S = Q K^T into tensor memory, P = bf16(S) stored back to tensor memory as the next gemm's A
    operand (mma_ts), O = P V accumulated into a fragment with no mbarrier."""
    @T.prim_func
    def main(Q: T.Tensor((M, D), "bfloat16"), Kt: T.Tensor((N, D), "bfloat16"), V: T.Tensor((N, D), "bfloat16"),
             O: T.Tensor((M, D), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            Q_s = T.alloc_shared((bm, D), "bfloat16")
            K_s = T.alloc_shared((bn, D), "bfloat16")
            V_s = T.alloc_shared((bn, D), "bfloat16")
            S_tmem = T.alloc_tmem([bm, bn], "float32")
            P_tmem = T.alloc_tmem([bm, bn], "bfloat16")
            bar = T.alloc_barrier(1)
            S_f = T.alloc_fragment((bm, bn), "float32")
            P_f = T.alloc_fragment((bm, bn), "bfloat16")
            O_f = T.alloc_fragment((bm, D), "float32")
            T.clear(O_f)
            T.copy(Q[bx * bm, 0], Q_s)
            for k in T.serial(T.ceildiv(N, bn)):
                T.copy(Kt[k * bn, 0], K_s)
                T.copy(V[k * bn, 0], V_s)
                T.tcgen05_gemm(Q_s, K_s, S_tmem, transpose_B=True, mbar=bar, clear_accum=True)
                T.mbarrier_wait_parity(bar, k % 2)
                T.copy(S_tmem, S_f)
                T.copy(S_f, P_f)
                T.copy(P_f, P_tmem)
                T.tcgen05_gemm(P_tmem, V_s, O_f, policy=T.GemmWarpPolicy.FullRow)
            T.copy(O_f, O[bx * bm, 0])
    return main


def _ref(a, b_nk):
    return a.float() @ b_nk.float().T


@pytest.mark.parametrize("commit", ["gemm", "arrive"])
@pytest.mark.parametrize("stages", [0, 2])
def test_tmem_gemm_matches_torch(build, device, commit, stages):
    M, N, K = 128, 96, 192
    if build.rejects_on_cuda(SM100, tmem_gemm, M, N, K, 64, 32, 64, stages=stages, commit=commit):
        return
    k = build(tmem_gemm, M, N, K, 64, 32, 64, stages=stages, commit=commit)
    a = torch.randn(M, K, dtype=torch.bfloat16, device=device)
    b = torch.randn(N, K, dtype=torch.bfloat16, device=device)
    c = k(a, b)
    torch.testing.assert_close(c.float(), _ref(a, b).to(torch.bfloat16).float(), rtol=1e-2, atol=1e-2)


def test_dynamic_clear_restarts_each_tile(build, device):
    """clear_accum=(k == 0): every block starts its product from zero, whatever tensor memory held."""
    M, N, K = 64, 64, 256
    if build.rejects_on_cuda(SM100, tmem_gemm, M, N, K, 32, 32, 64, dtype="float16", stages=0):
        return
    k = build(tmem_gemm, M, N, K, 32, 32, 64, dtype="float16", stages=0)
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(N, K, dtype=torch.float16, device=device)
    for _ in range(2):   # a second call must not see the first one's accumulator
        torch.testing.assert_close(k(a, b).float(), _ref(a, b).half().float(), rtol=1e-2, atol=1e-2)


def test_accumulates_into_existing_tmem(build, device):
    M, N, K = 64, 32, 128
    if build.rejects_on_cuda(SM100, tmem_zero_start, M, N, K, 32, 32, 32):
        return
    k = build(tmem_zero_start, M, N, K, 32, 32, 32)
    a = torch.randn(M, K, dtype=torch.float16, device=device)
    b = torch.randn(N, K, dtype=torch.float16, device=device)
    torch.testing.assert_close(k(a, b), _ref(a, b) + 1.0, rtol=1e-3, atol=1e-3)


def test_tmem_operand_and_fragment_accumulator(build, device):
    M, N, D = 128, 128, 64
    if build.rejects_on_cuda(SM100, attention_like, M, N, D, 64, 64):
        return
    k = build(attention_like, M, N, D, 64, 64)
    q = torch.randn(M, D, dtype=torch.bfloat16, device=device)
    kk = torch.randn(N, D, dtype=torch.bfloat16, device=device)
    v = torch.randn(N, D, dtype=torch.bfloat16, device=device)
    o = k(q, kk, v)
    ref = torch.zeros(M, D)
    for j in range(0, N, 64):
        s = q.float() @ kk[j:j + 64].float().T
        ref += s.to(torch.bfloat16).float() @ v[j:j + 64].float()
    torch.testing.assert_close(o.cpu(), ref, rtol=1e-2, atol=1e-1)


def test_cuda_refusal_names_sm100_and_line():
    func = tmem_gemm.fn(64, 64, 64, 64, 64, 64)
    for arch in ("sm_80", "sm_90a"):
        with pytest.raises(TilecraftError, match=r"T\.alloc_tmem is a tensor-memory allocation, which needs an "
                                                 r"sm_100") as e:
            tilelang.compile(func, out_idx=[2], target={"kind": "cuda", "arch": arch})
        assert "test_tcgen05.py" in str(e.value)
    with pytest.raises(TilecraftError, match=r"no lowering for it yet"):
        tilelang.compile(func, out_idx=[2], target={"kind": "cuda", "arch": "sm_100a"})


def _too_wide():
    @T.prim_func
    def f(A: T.Tensor((128, 1024), "float32")):
        with T.Kernel(1, threads=128):
            T.alloc_tmem([128, 1024], "float32")
    return f


def _two_cta():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            C = T.alloc_tmem([64, 64], "float32")
            T.tcgen05_gemm(A_s, A_s, C, mbar=None, use_2cta=True)
    return f


def _global_acc():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            T.tcgen05_gemm(A_s, A_s, C, mbar=None)
    return f


@pytest.mark.parametrize("make,match", [(_too_wide, r"\(128, 1024\) of float32 takes 1024 32-bit columns"),
                                        (_two_cta, "use_2cta"), (_global_acc, "C C is in global memory")])
def test_bad_uses_are_errors_at_the_line(make, match):
    with pytest.raises(TilecraftError, match=match) as e:
        tilelang.compile(make(), target="cpu")
    assert "test_tcgen05.py" in str(e.value)

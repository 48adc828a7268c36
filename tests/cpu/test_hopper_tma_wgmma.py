"""The copies and gemms TileLang's warp-specialized programs issue by hand: `T.tma_copy(src, dst,
barrier=bar)`, `T.wgmma_gemm`, `T.wait_wgmma` (ir/hopper.py `TmaCopy`; language/hopper.py), on every
target of conftest.py (cpu, cuda, cuda-compile: NVRTC for sm_90a), against torch on fresh random
inputs, in the shapes of TileLang's warp_specialize / MLA examples: a producer warp group loading
tiles with T.tma_copy and arriving on the mbarrier, a consumer warp group waiting and multiplying.

On CUDA T.tma_copy has a generic lowering (the issuing threads copy, then a barrier of those threads;
their own arrival publishes the tile), not a TMA load; on the GPU that path is unverified here."""
from __future__ import annotations

import inspect
import warnings

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

THIS = __file__.rsplit("/", 1)[-1]


@tilelang.jit(out_idx=[2])
def tma_gemm_two_barriers(M, N, K, bm, bn, bk, producer=0, consumer=1):
    """example_warp_specialize_gemm_copy_0_gemm_1's shape: tma_copy + arrive / wait + wgmma_gemm."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            with T.ws(consumer):
                T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=0):
                with T.ws(producer):
                    T.barrier_wait(done, (ko + 1) % 2)
                    T.tma_copy(A[by * bm, ko * bk], A_s, barrier=ready)
                    T.tma_copy(B[ko * bk, bx * bn], B_s, barrier=ready)
                    T.barrier_arrive(ready)
                with T.ws(consumer):
                    T.barrier_wait(ready, ko % 2)
                    T.wgmma_gemm(A_s, B_s, C_f)
                    T.wait_wgmma(0)
                    T.barrier_arrive(done)
            with T.ws(consumer):
                T.copy(C_f, C[by * bm, bx * bn])
    return main


@tilelang.jit(out_idx=[2])
def tma_gemm_ring(M, N, K, bm, bn, bk, stages=2):
    """example_warp_specialize_gemm_barrierpipe_stage2's shape: a ring of stage tiles, each loaded by
    T.tma_copy against its full mbarrier (a list of mbarriers), sliced bounds on both sides."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), "float16")
            B_s = T.alloc_shared((stages, bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            bars = T.alloc_barrier([128, 128] * stages)
            with T.ws(0):
                T.clear(C_f)
            for ko in range(T.ceildiv(K, bk)):
                with T.ws(1):
                    T.mbarrier_wait_parity(mbarrier=bars[ko % stages + stages], parity=((ko // stages) % 2) ^ 1)
                    T.tma_copy(A[by * bm: (by + 1) * bm, ko * bk: (ko + 1) * bk], A_s[ko % stages, :, :],
                               barrier=bars[ko % stages])
                    T.tma_copy(B[ko * bk: (ko + 1) * bk, bx * bn: (bx + 1) * bn], B_s[ko % stages, :, :],
                               barrier=bars[ko % stages])
                    T.mbarrier_arrive(mbarrier=bars[ko % stages])
                with T.ws(0):
                    T.mbarrier_wait_parity(mbarrier=bars[ko % stages], parity=(ko // stages) % 2)
                    T.wgmma_gemm(A_s[ko % stages, :, :], B_s[ko % stages, :, :], C_f)
                    T.mbarrier_arrive(mbarrier=bars[ko % stages + stages])
            with T.ws(0):
                T.copy(C_f, C[by * bm, bx * bn])
    return main


def _check_gemm(kernel, device, M, N, K):
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c = kernel(a.to(device), b.to(device)).cpu()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("producer,consumer", [(0, 1), (1, 0)])
def test_tma_copy_and_wgmma_gemm_with_two_barriers(build, device, producer, consumer):
    _check_gemm(build(tma_gemm_two_barriers, 256, 384, 320, 128, 128, 64, producer, consumer), device, 256, 384, 320)


def test_tma_copy_ragged_tiles(build, device):
    """Tiles past the tensors' edges: the parts outside read as zero, as T.copy's."""
    _check_gemm(build(tma_gemm_two_barriers, 200, 136, 96, 128, 128, 32), device, 200, 136, 96)


def test_tma_copy_into_a_ring_of_stage_tiles(build, device):
    _check_gemm(build(tma_gemm_ring, 256, 256, 512, 128, 128, 64), device, 256, 256, 512)


@tilelang.jit(out_idx=[2])
def tma_gemm_roles(M, N, K, bm, bn, bk, stages=2):
    """Each warp group runs its whole role, its own loop included (TileLang's MLA programs): the
    producer runs ahead up to `stages` tiles, so only concurrent warp groups can run it (the CPU
    target emulates the block's threads)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), "float16")
            B_s = T.alloc_shared((stages, bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([128] * stages)
            tx = T.get_thread_binding()
            if tx < 128:
                for ko in T.serial(T.ceildiv(K, bk)):
                    T.barrier_wait(empty[ko % stages], ((ko // stages) % 2) ^ 1)
                    T.tma_copy(A[by * bm, ko * bk], A_s[ko % stages, :, :], barrier=full[ko % stages])
                    T.tma_copy(B[ko * bk, bx * bn], B_s[ko % stages, :, :], barrier=full[ko % stages])
                    T.barrier_arrive(full[ko % stages])
            else:
                T.clear(C_f)
                for ko in T.serial(T.ceildiv(K, bk)):
                    T.barrier_wait(full[ko % stages], (ko // stages) % 2)
                    T.wgmma_gemm(A_s[ko % stages, :, :], B_s[ko % stages, :, :], C_f)
                    T.wait_wgmma(0)
                    T.barrier_arrive(empty[ko % stages])
                T.copy(C_f, C[by * bm, bx * bn])
    return main


def test_tma_copy_roles_run_concurrently(build, device):
    kernel = build(tma_gemm_roles, 256, 128, 384, 128, 128, 64)
    if device == "cpu":
        assert "one fiber per CUDA thread" in kernel.get_kernel_source()
    _check_gemm(kernel, device, 256, 128, 384)


@tilelang.jit(out_idx=[2])
def whole_block_tma_then_gemm_slices(M, N, K, kt, pieces):
    """Every thread of the block issues the load and arrives (256 arrivals: flashmla's Q load), then
    one warp group multiplies K in `pieces` slices with `clear_accum=(j == 0)`, a kernel value of
    an unrolled loop (flashmla's first QK gemm)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=256) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((N, K), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            bar = T.alloc_barrier(arrive_count=256)
            T.fill(C_f, 7.0)   # cleared by the first slice's gemm
            T.tma_copy(A[0:M, 0:K], A_s, barrier=bar)
            T.tma_copy(B[0:N, 0:K], B_s, barrier=bar)
            T.barrier_arrive(bar)
            T.barrier_wait(bar, 0)
            for j in T.unroll(pieces):
                T.wgmma_gemm(A_s[:, j * kt:(j + 1) * kt], B_s[:, j * kt:(j + 1) * kt], C_f, transpose_B=True,
                             clear_accum=(j == 0))
            T.wait_wgmma(0)
            T.copy(C_f, C)
    return main


def test_whole_block_tma_copy_and_dynamic_clear_accum(build, device):
    M, N, kt, pieces = 64, 64, 64, 3
    kernel = build(whole_block_tma_then_gemm_slices, M, N, kt * pieces, kt, pieces)
    a = torch.randn(M, kt * pieces, dtype=torch.float16)
    b = torch.randn(N, kt * pieces, dtype=torch.float16)
    c = kernel(a.to(device), b.to(device)).cpu()
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-2, atol=1e-2)


@tilelang.jit(out_idx=[1])
def tma_store(N, bn):
    """A TMA store (shared -> global, no barrier) and T.tma_store_arrive / T.tma_store_wait."""
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, bn), threads=128) as bx:
            s = T.alloc_shared((bn,), "float32")
            T.copy(X[bx * bn], s)
            for i in T.Parallel(bn):
                s[i] = s[i] * 2.0 + 1.0
            T.tma_copy(s, Y[bx * bn], eviction_policy="evict_first")
            T.tma_store_arrive()
            T.tma_store_wait(0)
    return main


def test_tma_copy_store_from_shared(build, device):
    x = torch.randn(1000)
    y = build(tma_store, 1000, 256)(x.to(device)).cpu()
    torch.testing.assert_close(y, x * 2 + 1)


# ---- what is refused, at the user's line ---------------------------------------------------------

def _line_of(fn, text):
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, t in enumerate(src) if text in t)


@tilelang.jit(out_idx=[1], target="cpu")
def no_arrival_after_copy(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            s = T.alloc_shared((N,), "float32")
            bar = T.alloc_barrier(arrive_count=128)
            with T.ws(0):
                T.tma_copy(A, s, barrier=bar)
            with T.ws(1):
                T.barrier_arrive(bar)
                T.barrier_wait(bar, 0)
                T.copy(s, B)
    return main


def test_a_tma_copy_whose_threads_never_arrive_is_refused_at_its_line():
    line = _line_of(no_arrival_after_copy.fn, "T.tma_copy(A, s, barrier=bar)")
    with pytest.raises(TilecraftError, match=rf'(?s)never arrive on its mbarrier bar.*{THIS}", line {line}'):
        no_arrival_after_copy(64)


def _compile_error(body):
    @tilelang.jit(target="cpu")
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), H: T.Tensor((N,), "float16")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((N,), "float32")
                f = T.alloc_fragment((N,), "float32")
                bar = T.alloc_barrier(arrive_count=128)
                body(A, H, s, f, bar)
                T.barrier_arrive(bar)
        return main
    with pytest.raises(TilecraftError) as e:
        k.get_tir(64)
    return str(e.value)


@pytest.mark.parametrize("body,match", [
    (lambda A, H, s, f, bar: T.tma_copy(A, s), "needs barrier=bar"),
    (lambda A, H, s, f, bar: T.tma_copy(H, s, barrier=bar), "TMA moves bytes and does not convert"),
    (lambda A, H, s, f, bar: T.tma_copy(A, f, barrier=bar), "a global tensor into a shared tile"),
    (lambda A, H, s, f, bar: T.tma_copy(A, s, barrier=bar, cluster_mask=3), "multicast"),
    (lambda A, H, s, f, bar: T.tma_copy(A, s, barrier=bar, leader_scope_threads=48), "multiple of 32"),
    (lambda A, H, s, f, bar: T.tma_copy(s, A, barrier=bar), "store from shared to global memory takes no barrier"),
    (lambda A, H, s, f, bar: T.tma_copy(A, s, barrier=f), "not mbarriers"),
    (lambda A, H, s, f, bar: T.wait_wgmma(-1), "must be >= 0"),
])
def test_bad_manual_hopper_calls_are_clear_errors(body, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert match in _compile_error(body)


@tilelang.jit(out_idx=[3])
def windowed_wgmma_then_rescaled_gemm(H, N, DQ, D):
    """The MLA consumer's step (example_mla_decode_ws): S = Q K^T accumulated over column windows of
    the shared tiles with T.wgmma_gemm, a row vector from S rescales an accumulator of another width
    that a second gemm adds to.  Windows of a wider tile keep these gemms off wgmma in tilecraft; on
    mma.sync their warps lie along M as wgmma's would (TileLang's), so the row vector has one layout."""
    half = DQ // 2

    @T.prim_func
    def main(Q: T.Tensor((H, DQ), "float16"), K: T.Tensor((N, DQ), "float16"), V: T.Tensor((N, D), "float16"),
             O: T.Tensor((H, D), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Qs = T.alloc_shared((H, DQ), "float16")
            Ks = T.alloc_shared((N, DQ), "float16")
            Vs = T.alloc_shared((N, D), "float16")
            Ss = T.alloc_shared((H, N), "float16")
            acc_s = T.alloc_fragment((H, N), "float32")
            acc_o = T.alloc_fragment((H, D), "float32")
            m = T.alloc_fragment((H,), "float32")
            alpha = T.alloc_fragment((H,), "float32")
            T.copy(Q, Qs)
            T.copy(K, Ks)
            T.copy(V, Vs)
            T.fill(acc_o, 1.0)
            T.clear(acc_s)
            T.wgmma_gemm(Qs[:, :half], Ks[:, :half], acc_s, transpose_B=True)
            T.wgmma_gemm(Qs[:, half:], Ks[:, half:], acc_s, transpose_B=True)
            T.wait_wgmma(0)
            T.reduce_max(acc_s, m, dim=1)
            for h in T.Parallel(H):
                alpha[h] = m[h] * 0.125
            for h, d in T.Parallel(H, D):
                acc_o[h, d] *= alpha[h]
            T.copy(acc_s, Ss)
            T.gemm(Ss, Vs, acc_o)
            T.copy(acc_o, O)
    return main


def test_wgmma_gemm_row_vectors_shared_with_a_wider_accumulator(build, device):
    H, N, DQ, D = 64, 64, 128, 256
    kernel = build(windowed_wgmma_then_rescaled_gemm, H, N, DQ, D)
    q, k, v = (torch.randn(*s, dtype=torch.float16) / 4 for s in ((H, DQ), (N, DQ), (N, D)))
    s = q.float() @ k.float().T
    alpha = s.max(dim=1).values * 0.125
    ref = alpha[:, None] * torch.ones(H, D) + s.half().float() @ v.float()
    o = kernel(q.to(device), k.to(device), v.to(device)).cpu()
    torch.testing.assert_close(o, ref, rtol=1e-2, atol=1e-2)

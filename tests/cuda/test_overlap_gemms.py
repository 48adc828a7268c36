"""The overlapped consumer loop (transform/pipelining/overlap.py), compile-only: which loops take it (the
plan says so), which do not and why, and what the generated code must hold (an asynchronous wgmma with
A from registers, both waits, the stage released one iteration later, no spills).  The GPU twin
(tests/gpu/test_overlap_gemms_gpu.py) runs the same programs against torch."""
from __future__ import annotations

import re

import pytest

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.kernels import attention

SM90 = {"kind": "cuda", "arch": "sm_90a"}
OVERLAP = "previous iteration's second gemm runs"


def two_gemm_loop(seq_len: int, dim: int = 64, block: int = 128, stages: int = 3, rescale_first: bool = False,
                  kv_same: bool = False):
    """O = sum over key blocks of (exp(Q K^T - rowmax) @ V) with a running rescale: FlashAttention's
    statements without the mask and scale; `rescale_first` moves the O rescale ahead of the softmax
    (nothing left to overlap: the loop must keep its plain form); `kv_same` makes the second gemm
    read K's tile as well (V = K: the copies do not split into two rings)."""
    shape = [seq_len, dim]

    @T.prim_func
    def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"), V: T.Tensor(shape, "float16"),
             O: T.Tensor(shape, "float16")):
        with T.Kernel(T.ceildiv(seq_len, block), threads=256) as bx:
            Q_s = T.alloc_shared([block, dim], "float16")
            K_s = T.alloc_shared([block, dim], "float16")
            V_s = T.alloc_shared([block, dim], "float16")
            S = T.alloc_fragment([block, block], "float")
            P = T.alloc_fragment([block, block], "float16")
            acc = T.alloc_fragment([block, dim], "float")
            m = T.alloc_fragment([block], "float")
            m_prev = T.alloc_fragment([block], "float")
            alpha = T.alloc_fragment([block], "float")
            T.copy(Q[bx * block, 0], Q_s)
            T.fill(acc, 0)
            T.fill(m, -1.0e30)
            for k in T.Pipelined(T.ceildiv(seq_len, block), num_stages=stages):
                T.copy(K[k * block, 0], K_s)
                if not kv_same:
                    T.copy(V[k * block, 0], V_s)
                for i, j in T.Parallel(block, block):
                    S[i, j] = T.if_then_else(k * block + j < seq_len, 0.0, -1.0e30)
                T.gemm(Q_s, K_s, S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                if rescale_first:
                    for i, j in T.Parallel(block, dim):
                        acc[i, j] = acc[i, j] * 0.5
                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
                for i in T.Parallel(block):
                    alpha[i] = T.exp(m_prev[i] - m[i])
                for i, j in T.Parallel(block, block):
                    S[i, j] = T.exp(S[i, j] - m[i])
                for i, j in T.Parallel(block, dim):
                    acc[i, j] = acc[i, j] * alpha[i]
                T.copy(S, P)
                T.gemm(P, K_s if kv_same else V_s, acc, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, O[bx * block, 0])
    return main


def _plan(k) -> str:
    return k.get_plan()


@pytest.mark.cuda_compile
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attention_overlaps_its_gemms_on_two_rings(causal, stages):
    k = tilelang.compile(attention.flash_attention.fn(2, 2, 1000, 128, is_causal=causal, block_M=128, block_N=128,
                                                      num_stages=stages, threads=256), target=SM90)
    assert OVERLAP in _plan(k), _plan(k)
    src = k.get_kernel_source()
    S = stages
    # K on ring 0 (released once g1 retired), V on ring 1 (released once g2 retired, an iteration later);
    # in the loop: wait for K(k) and V(k-1), the turn, g1 issued with one group left in flight, g2 issued
    # asynchronously on the previous tile's stage, the turn passed on, the two waits each followed by its
    # ring's release, the hold fence between
    body = src[src.index("for (int k = 1;"):]
    order = [f"tc::mbar_wait_parity((&tma_full_0[(k % {S})])",
             f"tc::mbar_wait_parity((&tma_full_1[tc::floormod((k - 1), {S})])", "tc::wg_turn_wait<2>()",
             "tc::gemm_ss_sm90<128, 128, 128, 2, false, true, tc::half_t, 1,", "tc::gemm_rs_sm90_async<",
             "tc::wg_turn_pass<2>()", "tc::wgmma_wait<1, 64>((&acc_s[0]))",
             f"tc::mbar_arrive_warp((&tma_empty_0[(k % {S})]))", "tc::wgmma_wait<0, 64>((&acc_o[0]))",
             "tc::wgmma_hold_fence<32>", f"tc::mbar_arrive_warp((&tma_empty_1[tc::floormod((k - 1), {S})]))"]
    at = [body.find(x) for x in order]
    assert all(a >= 0 for a in at) and at == sorted(at), list(zip(order, at))
    assert re.search(rf"gemm_rs_sm90_async<[^>]*>\(\(&acc_s_cast\[0\]\), \(&V_shared\[\(tc::floormod\(\(k - 1\), {S}\)",
                     body)
    # each ring's producer waits for its own stage to be released
    assert f"tc::mbar_wait_parity((&tma_empty_0[(k_load % {S})])" in src
    assert f"tc::mbar_wait_parity((&tma_empty_1[(k_load % {S})])" in src
    # the last tile's second gemm after the loop, synchronous, after waiting for its V
    assert re.search(r"tc::mbar_wait_parity\(\(&tma_full_1\[[^\n]*\n\s*tc::gemm_rs_sm90<128, 128, 128, 2, false, "
                     r"tc::half_t, 128>", src[src.index("for (int k = 1;"):])
    from tilecraft.compiler.sass import resource_usage
    assert next(iter(resource_usage(k.artifact.binary).values()))["local_bytes"] == 0


@pytest.mark.cuda_compile
def test_copies_that_do_not_split_share_one_ring_and_need_three_stages():
    two = tilelang.compile(two_gemm_loop(1000, stages=2, kv_same=True), out_idx=[-1], target=SM90,
                           pass_configs={"tc.warp_specialize": True})
    assert OVERLAP not in _plan(two) and "warp-specialized" in _plan(two)
    three = tilelang.compile(two_gemm_loop(1000, stages=3, kv_same=True), out_idx=[-1], target=SM90,
                             pass_configs={"tc.warp_specialize": True})
    assert OVERLAP in _plan(three), _plan(three)
    src = three.get_kernel_source()
    assert "tma_full_1" not in src and "tc::mbar_arrive_warp((&tma_empty[tc::floormod((k - 1), 3)]))" in src


@pytest.mark.cuda_compile
def test_the_switches_off_keep_the_plain_consumer_loop():
    solo = tilelang.compile(attention.flash_attention.fn(2, 2, 1000, 128, block_M=128, block_N=128, num_stages=3,
                                                         threads=256), target=SM90,
                            pass_configs={"tc.overlap_pingpong": False})
    assert OVERLAP in _plan(solo) and "wg_turn" not in solo.get_kernel_source()
    assert "tc::wg_turn_init<2>();" in tilelang.compile(attention.flash_attention.fn(
        2, 2, 1000, 128, block_M=128, block_N=128, num_stages=3, threads=256), target=SM90).get_kernel_source()
    off = tilelang.compile(attention.flash_attention.fn(2, 2, 1000, 128, block_M=128, block_N=128, num_stages=3,
                                                        threads=256), target=SM90,
                           pass_configs={"tc.overlap_gemms": False})
    assert OVERLAP not in _plan(off) and "gemm_rs_sm90_async" not in off.get_kernel_source()


@pytest.mark.cuda_compile
def test_a_loop_whose_softmax_touches_the_second_gemm_is_not_reordered():
    ok = tilelang.compile(two_gemm_loop(1000), out_idx=[-1], target=SM90,
                          pass_configs={"tc.warp_specialize": True})
    assert OVERLAP in _plan(ok), _plan(ok)
    bad = tilelang.compile(two_gemm_loop(1000, rescale_first=True), out_idx=[-1], target=SM90,
                           pass_configs={"tc.warp_specialize": True})
    assert OVERLAP not in _plan(bad) and "gemm_rs_sm90_async" not in bad.get_kernel_source()


@pytest.mark.cuda_compile
def test_two_gemm_loop_matches_torch_on_the_cpu_target():
    """The program the GPU twin runs is right on the reference target (so a GPU mismatch is the
    overlapped loop's)."""
    torch = pytest.importorskip("torch")
    from test_overlap_gemms_ref import two_gemm_reference
    k = tilelang.compile(two_gemm_loop(200), out_idx=[-1], target="cpu")
    q, kk, v = (torch.randn(200, 64) for _ in range(3))
    q16, k16, v16 = q.half(), kk.half(), v.half()
    out = k(q16, k16, v16).float()
    ref = two_gemm_reference(q16, k16, v16, 128)
    assert ((out - ref).norm() / ref.norm()).item() < 2e-2

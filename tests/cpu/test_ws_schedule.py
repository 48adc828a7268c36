"""TileLang's warp-specialization schedule API (aws/gemm.py, aws/flash_attention.py; issue 27).

`T.annotate_ws_schedule(T.WSSchedule(num_warps, roles=[T.WSRole], pipelines=[T.WSPipeline],
scopes=[T.WSScope]))` tells TileLang how to rewrite a plain kernel whose ops carry ids
(`annotations={T.WSID: ...}`, `with T.ws_op(...)`) into a warp-specialized one computing the same
thing.  tilecraft checks the schedule at the user's line and runs the kernel as written (a warning
says the rewrite is not materialized).  Here: the plain gemm into tensor memory with its schedule,
against torch; T.gemm into a T.alloc_tmem tile is the tcgen05 gemm; each malformed schedule is an
error naming what is wrong."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError


def scheduled_gemm(M=256, N=128, K=128, bm=128, bn=64, bk=32, stages=2, schedule=None, c_frag=False):
    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "bfloat16")
            B_s = T.alloc_shared((bn, bk), "bfloat16")
            C_tmem = T.alloc_tmem([bm, bn], "float32")
            C_l = T.alloc_fragment((bm, bn), "float32")
            C_s = T.alloc_shared((bm, bn), "bfloat16")
            T.annotate_ws_schedule(schedule(A_s, B_s, C_tmem, C_l) if schedule else T.WSSchedule(
                num_warps=8,
                roles=[T.WSRole("TMA", warps_lo=0, warps_hi=1, max_nreg=40),
                       T.WSRole("MMA", warps_lo=1, warps_hi=2, max_nreg=40),
                       T.WSRole("Epilogue", warps_lo=4, warps_hi=8, max_nreg=224)],
                pipelines=[T.WSPipeline("smem", [A_s, B_s], depth=stages),
                           T.WSPipeline("tmem", [C_tmem], depth=1)],
                scopes=[T.WSScope("loop_k", {
                            "TMA": [T.WSSync.producer_acquire("smem"), "copy_A", "copy_B",
                                    T.WSSync.producer_commit("smem")],
                            "MMA": [T.WSSync.consumer_wait("smem", stage=stages - 1), "gemm_C",
                                    T.WSSync.consumer_release("smem", stage=stages - 1)],
                            "Epilogue": []}),
                        T.WSScope(T.WSScope.ROOT, {
                            "TMA": ["loop_k"],
                            "MMA": [T.WSSync.producer_acquire("tmem"), "loop_k", T.WSSync.producer_commit("tmem")],
                            "Epilogue": [T.WSSync.consumer_wait("tmem"), "store",
                                         T.WSSync.consumer_release("tmem")]})]))
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages, annotations={T.WSID: "loop_k"}):
                T.copy(A[by * bm, k * bk], A_s, annotations={T.WSID: "copy_A"})
                T.copy(B[bx * bn, k * bk], B_s, annotations={T.WSID: "copy_B"})
                T.gemm(A_s, B_s, C_l if c_frag else C_tmem, transpose_B=True, clear_accum=k == 0,
                       annotations={T.WSID: "gemm_C"})
            with T.ws_op("store"):
                if not c_frag:
                    T.copy(C_tmem, C_l)
                T.copy(C_l, C_s)
                T.copy(C_s, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("c_frag", [False, True], ids=["tmem", "fragment"])
def test_scheduled_gemm_runs_as_written(c_frag):
    from tilecraft.language.builder import _WARNED
    _WARNED.discard(("T.annotate_ws_schedule",))   # warned once per process
    with pytest.warns(UserWarning, match="does not rewrite the kernel by it yet"):
        kernel = tilelang.compile(scheduled_gemm(c_frag=c_frag), target="cpu")
    a, b = torch.randn(256, 128).bfloat16(), torch.randn(128, 128).bfloat16()
    c = torch.zeros(256, 128, dtype=torch.bfloat16)
    kernel(a, b, c)
    torch.testing.assert_close(c.float(), (a.float() @ b.float().T), rtol=1e-2, atol=1e-2)


def _roles(*roles):
    """A schedule of these roles ((name, warps_lo, warps_hi[, max_nreg]) each), built in the kernel."""
    return lambda A_s, B_s, C_tmem, C_l: T.WSSchedule(num_warps=8, roles=[T.WSRole(*r) for r in roles])


BAD = {
    "overlapping roles": (_roles(("a", 0, 2), ("b", 1, 3)),
                          r"roles 'a' \(warps \[0, 2\)\) and 'b' \(warps \[1, 3\)\) overlap"),
    "beyond num_warps": (_roles(("a", 4, 9)), r"role 'a' runs on warps \[4, 9\), beyond "
                                                                        r"num_warps=8"),
    "empty role": (_roles(("a", 2, 2)), r"T.WSRole\('a'\) warps_hi must be a compile-time "
                                                                  r"int >= 3"),
    "bad max_nreg": (_roles(("a", 0, 1, 41)), r"max_nreg must be a multiple of 8"),
    "fragment in a pipeline": (lambda A_s, B_s, C_tmem, C_l: T.WSSchedule(
        num_warps=4, roles=[T.WSRole("a", warps_lo=0, warps_hi=4)], pipelines=[T.WSPipeline("p", [C_l])]),
        r"T.WSPipeline\('p'\): its buffers are shared-memory or tensor-memory tiles .*\(fragment\)"),
    "unknown pipeline": (lambda A_s, B_s, C_tmem, C_l: T.WSSchedule(
        num_warps=4, roles=[T.WSRole("a", warps_lo=0, warps_hi=4)], pipelines=[T.WSPipeline("p", [A_s])],
        scopes=[T.WSScope("loop_k", {"a": [T.WSSync.consumer_wait("q")]})]),
        r"T.WSSync.consumer_wait\('q'\) names no pipeline of the schedule \(p\)"),
    "unknown role": (lambda A_s, B_s, C_tmem, C_l: T.WSSchedule(
        num_warps=4, roles=[T.WSRole("a", warps_lo=0, warps_hi=4)],
        scopes=[T.WSScope(T.WSScope.ROOT, {"b": ["loop_k"]})]),
        r"role 'b' is not one of the schedule's roles \(a\)"),
    "step not a name": (lambda A_s, B_s, C_tmem, C_l: T.WSSchedule(
        num_warps=4, roles=[T.WSRole("a", warps_lo=0, warps_hi=4)], scopes=[T.WSScope("loop_k", {"a": [3]})]),
        r"an op id \(or a T.WSSync step\): a name must be a non-empty str, got 3"),
    "negative stage": (lambda A_s, B_s, C_tmem, C_l: T.WSSync.producer_acquire("p", stage=-1),
                       r"stage must be a compile-time int >= 0"),
    "not a schedule": (lambda A_s, B_s, C_tmem, C_l: {"num_warps": 8},
                       r"T.annotate_ws_schedule takes a T.WSSchedule"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_schedules_are_errors(case):
    schedule, message = BAD[case]
    with pytest.raises(TilecraftError, match=message) as e:
        tilelang.compile(scheduled_gemm(schedule=schedule), target="cpu")
    assert "test_ws_schedule.py" in str(e.value), str(e.value)


def test_a_ws_id_is_a_name():
    with pytest.raises(TilecraftError, match=r"T.fill\(annotations=\{T.WSID: ...\}\): the op's schedule id must be a "
                                             r"non-empty str, got 7"):
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                s = T.alloc_shared((64,), "float32")
                T.fill(s, 1, annotations={T.WSID: 7})
                T.copy(s, A)
        tilelang.compile(main, target="cpu")


def test_gemm_mbar_needs_tensor_memory():
    with pytest.raises(TilecraftError, match=r"T.gemm\(mbar=...\): the completion mbarrier belongs to a tcgen05 gemm"):
        @T.prim_func
        def main(A: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float32")):
            with T.Kernel(1, threads=128) as bx:
                a_s = T.alloc_shared((32, 32), "float16")
                c = T.alloc_fragment((32, 32), "float32")
                bar = T.alloc_barrier([1])
                T.copy(A, a_s)
                T.gemm(a_s, a_s, c, clear_accum=True, mbar=bar[0])
                T.copy(c, C)
        tilelang.compile(main, target="cpu")

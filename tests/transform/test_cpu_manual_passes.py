"""The CPU target's passes that tests/transform/test_passes.py does not cover, alone, IR in / IR out:
`lower_manual_sync_cpu` (T.ws branches, mbarriers and register budgets of the tile path) and the
thread-level mode's `mark_cpu_threads` with the choice of that pipeline (`needs_threads`)."""
from __future__ import annotations

import tilecraft.language as T
from tilecraft.ir import Copy, collect
from tilecraft.ir.hopper import BarrierArrive, BarrierInit, BarrierWait, SetMaxNreg, WarpGroupScope
from tilecraft.ir.intrinsics.base import IntrinsicCall
from tilecraft.options import as_options
from tilecraft.target import Target
from tilecraft.transform.cpu_threads import CPU_THREADS_PIPELINE, mark_cpu_threads, needs_threads
from tilecraft.transform.lower_manual_sync_cpu import lower_manual_sync_cpu
from tilecraft.transform.pipeline import CPU_PIPELINE, PassContext, pipeline_for

CPU = Target.resolve("cpu")
CTX = PassContext(CPU)
MANUAL = (WarpGroupScope, BarrierInit, BarrierArrive, BarrierWait, SetMaxNreg)


def around(func, the_pass, pipeline=CPU_PIPELINE, ctx=CTX):
    for p in pipeline[:pipeline.index(the_pass)]:
        func = p(func, ctx)
    return func, the_pass(func, ctx)


def nodes(func, cls):
    return collect(func.body, lambda n: isinstance(n, cls))


def producer_consumer(threads):
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=threads) as _:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                T.set_max_nreg(40, 0)
                T.copy(A, A_s)
                T.copy(B, B_s)
                T.barrier_arrive(ready)
            with T.ws(0):
                T.set_max_nreg(232, 1)
                T.clear(C_f)
                T.barrier_wait(ready, 0)
                T.gemm(A_s, B_s, C_f)
                T.copy(C_f, C)
    return main


def test_lower_manual_sync_cpu_leaves_no_manual_construct_and_keeps_program_order():
    before, after = around(producer_consumer(256), lower_manual_sync_cpu)
    assert all(nodes(before, cls) for cls in MANUAL)
    assert not any(nodes(after, cls) for cls in MANUAL)
    # both branches run (both warp groups exist), the producer's statements first
    assert [c.dst.buffer.name for c in nodes(after, Copy)] == ["A_s", "B_s", "C"]
    calls = [c.intrinsic.describe() for c in nodes(after, IntrinsicCall)]
    assert len(calls) == 3 and "init" in calls[0] and "arrive" in calls[1] and "wait" in calls[2], calls
    arrive = nodes(after, IntrinsicCall)[1]
    assert arrive.args[-1].value == 128   # the arrival counts once per thread of the branch that runs it


def test_lower_manual_sync_cpu_drops_the_branch_of_a_warp_group_the_block_does_not_have():
    _, after = around(producer_consumer(128), lower_manual_sync_cpu)   # one warp group: ws(1) never runs
    assert [c.dst.buffer.name for c in nodes(after, Copy)] == ["C"]
    assert not any(nodes(after, cls) for cls in MANUAL)


def thread_indexed():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding()
            A[tx] = A[tx] + 1.0
    return main


def vector_add():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                A[i] = A[i] + 1.0
    return main


def test_needs_threads_picks_the_thread_level_pipeline_and_mark_cpu_threads_records_it():
    assert "thread index" in needs_threads(thread_indexed(), CTX)
    assert needs_threads(vector_add(), CTX) is None
    forced = PassContext(CPU, as_options({"tc.cpu_threads": True}))
    assert needs_threads(vector_add(), forced) == "pass_configs: tc.cpu_threads is True"
    assert needs_threads(thread_indexed(), PassContext(CPU, as_options({"tc.cpu_threads": False}))) is None
    assert pipeline_for(CPU, thread_indexed()) is CPU_THREADS_PIPELINE
    assert pipeline_for(CPU, vector_add()) is CPU_PIPELINE
    before, after = around(thread_indexed(), mark_cpu_threads, CPU_THREADS_PIPELINE)
    assert not before.lowering.cpu_threads and after.lowering.cpu_threads
    assert after.body is before.body

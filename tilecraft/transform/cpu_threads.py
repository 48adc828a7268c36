"""The CPU target's thread-level mode: which programs need their blocks' threads emulated, and the
passes that lower them.

The CPU target's reference path (transform/pipeline.py, CPU_PIPELINE) runs every statement over
its whole tile on one thread per block.  A program written at the level of CUDA threads has no
meaning there: it reads the thread index (`T.get_thread_binding`, `T.thread_binding`, lane and
warp indices) beyond the `if tx < 128:` branches that the tile path turns into warp-group branches,
exchanges registers between lanes (`T.shfl_*`, `T.warp_reduce_*`, `T.tvm_thread_allreduce`,
`T.sync_warp`), or has `T.ws` branches whose mbarrier waits only concurrently running warp groups
can satisfy.  Such a program is lowered here as for CUDA -- the same passes, so fragments are
per-thread registers with the layout inference's mapping, tile ops are spread over the threads,
barriers are where the CUDA path puts them -- for a machine without tensor cores, cp.async or TMA
(`Target("cpu").has(...)` is False for each: gemms are per-thread dot products, copies are plain),
and codegen/cpp_threads.py prints it as C++ whose blocks run one fiber per CUDA thread
(device/include/tilecraft_cpu_threads.h).  Every other program keeps the tile path and its code.

The fibers of a block interleave only where a thread waits (barriers, warp exchanges, mbarriers,
spin loops), one thread at a time otherwise: one valid CUDA schedule.

A `T.ClusterKernel` whose blocks arrive on each other's mbarriers (`T.mbarrier_arrive(bar, cta_id)`)
needs a cluster's blocks to run at the same time, as the GPU co-schedules them: in this mode such a
kernel runs a whole cluster as one pool of fibers -- every thread of each of its blocks, each block
with its own shared memory, barriers and warps -- so a wait in one block ends on another's arrival
(codegen/cpp_threads.py).  Code that relies on the lanes
of a warp running in lockstep between such points (implicit warp-synchronous code, undefined since
Volta but what a converged warp does) can compute something else here.  The one pattern the CUDA
lowering itself emits -- the threads holding copies of a fragment row each doing `shared[i] += x` in
a T.Parallel loop, one update on a GPU -- is lowered for this mode with only the first copy's thread
updating (lower_cuda._ReplicaUpdates).
"""
from __future__ import annotations

from ..ir import Kernel, collect
from ..ir import intrinsics as I
from ..ir.func import PrimFunc
from ..ir.hopper import BarrierArrive
from ..ir.node import where
from .warp_groups.concurrent_waits import needs_concurrent_warp_groups
from .cuda_pipeline import CUDA_PIPELINE

def needs_threads(func: PrimFunc, ctx) -> str | None:
    """Why `func` needs its blocks' threads emulated on the CPU target, or None (`ctx`: the pass
    context the pipeline will run with)."""
    mode = ctx.options.cpu_threads
    if func.body is None or mode is False:
        return None
    if mode is True:
        return "pass_configs: tc.cpu_threads is True"
    for c in collect(func.body, lambda n: isinstance(n, I.IntrinsicCall)):
        if c.intrinsic.thread_level:
            return f"{c.intrinsic.describe()}: lanes of a warp exchange values"
    remote = collect(func.body, lambda n: isinstance(n, BarrierArrive) and n.cta is not None)
    if remote:
        return f"{where(remote[0].span)}: T.mbarrier_arrive(bar, cta_id): the blocks of a cluster arrive on each other's mbarriers"
    from .lower_manual_sync_cpu import lower_manual_sync_cpu
    from .lower_tile_ops_cpu import thread_level_use
    tile_path = lower_manual_sync_cpu(func, ctx)
    if thread_level_use(tile_path) is not None:
        return "the program reads the thread index"
    for k in collect(tile_path.body, lambda n: isinstance(n, Kernel)):
        why = needs_concurrent_warp_groups(k)
        if why is not None:
            return why
    return None


def mark_cpu_threads(func: PrimFunc, ctx) -> PrimFunc:
    """The lowering state says so: codegen/cpp.py prints the function with codegen/cpp_threads.py."""
    return func.with_lowering(cpu_threads=True)


CPU_THREADS_PIPELINE = [
    # Mark the function first: the C++ printer emulates the threads of what these passes produce.
    mark_cpu_threads,
    # The CUDA passes, in their order and for their reasons (cuda_pipeline.py), on a target with
    # no tensor cores, cp.async or TMA.
    *CUDA_PIPELINE,
]

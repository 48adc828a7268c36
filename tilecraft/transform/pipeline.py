"""The pass pipelines, one flat list per target.  Each pass is `fn(func, target) -> func`.

Order matters and each position has a reason:
"""
from __future__ import annotations

from ..ir.func import PrimFunc
from .check_regions import check_regions
from .legalize_global_access import legalize_global_access
from .lower_manual_sync_cpu import lower_manual_sync_cpu
from .lower_tile_ops_cpu import lower_tile_ops_cpu

CPU_PIPELINE = [
    # Reject on-chip regions/indices that can never be in range, while tile ops still exist and
    # errors can name the user's copy or gemm.
    check_regions,
    # T.ws branches, mbarriers and register budgets (ir/hopper.py) in program order, before the
    # tile ops inside the branches are lowered.
    lower_manual_sync_cpu,
    # Every tile op becomes whole-tile loops: the reference semantics.
    lower_tile_ops_cpu,
    # Guard global accesses last, so the copies' loads/stores produced above get guards too.
    legalize_global_access,
]


def pipeline_for(target, func: PrimFunc | None = None) -> list:
    if target.kind == "cpu":
        # a program written at the level of CUDA threads: its blocks' threads emulated
        from .cpu_threads import CPU_THREADS_PIPELINE, needs_threads
        return CPU_THREADS_PIPELINE if func is not None and needs_threads(func, target) else CPU_PIPELINE
    from .cuda_pipeline import CUDA_PIPELINE
    return CUDA_PIPELINE


def run_pipeline(func: PrimFunc, target, trace: list | None = None) -> PrimFunc:
    for p in pipeline_for(target, func):
        func = p(func, target)
        if trace is not None:
            trace.append((p.__name__, func))
    return func

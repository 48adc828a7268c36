"""The pass pipelines, one flat list per target.  Each pass is `fn(func, target) -> func`.
The CPU target has a second list for programs written at the level of CUDA threads: the CUDA passes,
whose per-thread code runs with the block's threads emulated (cpu_threads.py says which programs).

Order matters and each position has a reason:
"""
from __future__ import annotations

from ..errors import InternalCompilerError, TilecraftError
from ..ir.func import PrimFunc
from .check_regions import check_regions
from .legalize_global_access import legalize_global_access
from .lower_manual_sync_cpu import lower_manual_sync_cpu
from .lower_tile_ops_cpu import lower_tile_ops_cpu
from .validate import validate

CPU_PIPELINE = [
    # A valid program, or an error at the user's line, before any lowering (transform/validate/).
    validate,
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
        try:
            func = p(func, target)
        except TilecraftError:
            raise
        except (KeyboardInterrupt, MemoryError):
            raise
        except Exception as e:  # noqa: BLE001 - ours, not the user's: say so
            raise compiler_bug(e, p.__name__, func) from e
        if trace is not None:
            trace.append((p.__name__, func))
    return func


def compiler_bug(e: BaseException, where: str, func: PrimFunc) -> InternalCompilerError:
    """An exception a pass raised that is not a `TilecraftError`: a bug in tilecraft, reported as one
    with the pass, the innermost compiler frame and the program's line."""
    import os
    import traceback
    frames = traceback.extract_tb(e.__traceback__)
    inner = frames[-1] if frames else None
    at = f" at {os.path.basename(inner.filename)}:{inner.lineno} ({inner.name})" if inner else ""
    return InternalCompilerError(
        f"compiler bug: the pass {where} failed on {func.name}{at}: {type(e).__name__}: {e}", func.span,
        hint="this is a mistake in tilecraft, not in your program; please report it with the program "
             "(TILECRAFT_VERBOSE=1 shows the pipeline)")

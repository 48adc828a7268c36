"""The pass pipelines, one flat list per target, and the context every pass receives.

The CPU target has a second list for programs written at the level of CUDA threads: the CUDA passes,
whose per-thread code runs with the block's threads emulated (cpu_threads.py says which programs).

Each pass is `fn(func, ctx) -> func`: `ctx` is a `PassContext`, the target, the typed options
(`Options`: every pass_configs key, the target's defaults applied by the caller) and a dump hook
called after every pass with its name and result.  Nothing travels in `PrimFunc` attributes or
thread-local state: a pass reads its inputs from `ctx` and the function, and returns a function.

Between passes `run_pipeline` checks the invariants the next passes rely on (`INVARIANTS`: after
which pass, what holds; transform/invariants.py); a broken one is an InternalCompilerError naming
the pass that broke it, as is any exception a pass raises that is not a TilecraftError.

Order matters and each position has a reason:
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import InternalCompilerError, TilecraftError
from ..ir.func import PrimFunc
from ..options import Options, as_options
from .check_regions import check_regions
from .fuse_gemm_k_loops_cpu import fuse_gemm_k_loops_cpu
from .invariants import no_tile_ops
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
    # A k-loop that only stages a gemm's operands becomes one gemm over all of k, the same bits (its
    # copies and gemm still tile ops, their regions checked above).
    fuse_gemm_k_loops_cpu,
    # Every tile op becomes whole-tile loops: the reference semantics.
    lower_tile_ops_cpu,
    # Guard global accesses last, so the copies' loads/stores produced above get guards too.
    legalize_global_access,
]


@dataclass(frozen=True)
class PassContext:
    """What every pass receives beside the function (tilus' pass context, triton's `make_ttgir(mod,
    metadata, opt, capability)`): `target`, `options` (an `Options`), and `dump(pass_name, func)`,
    called after each pass when given (`tilecraft show`, tests tracing the pipeline)."""
    target: object
    options: Options = Options()
    dump: Callable | None = None


def invariants() -> dict:
    """pass -> the checks that hold after it (each returns '' or what is wrong)."""
    from .cuda_pipeline import CUDA_INVARIANTS
    return {lower_tile_ops_cpu: (no_tile_ops,), **CUDA_INVARIANTS}


def pipeline_for(target, func: PrimFunc | None = None, options=None) -> list:
    if target.kind == "cpu":
        # a program written at the level of CUDA threads: its blocks' threads emulated
        from .cpu_threads import CPU_THREADS_PIPELINE, needs_threads
        ctx = PassContext(target, as_options(options))
        return CPU_THREADS_PIPELINE if func is not None and needs_threads(func, ctx) else CPU_PIPELINE
    from .cuda_pipeline import CUDA_PIPELINE
    return CUDA_PIPELINE


def run_pipeline(func: PrimFunc, target, options=None, *, dump: Callable | None = None,
                 trace: list | None = None, check: bool = True) -> PrimFunc:
    """`func` through the target's passes with `options` (an Options or a pass_configs dict, taken
    as given: the caller applies the target's defaults, compiler.build.effective_pass_configs).
    `trace`: a list that gets (pass name, function) after each pass; `dump`: a hook called so."""
    if trace is not None:
        outer = dump
        def dump(name, f, _outer=outer):  # noqa: E306
            trace.append((name, f))
            if _outer is not None:
                _outer(name, f)
    ctx = PassContext(target, as_options(options), dump)
    checks = invariants() if check else {}
    for p in pipeline_for(target, func, ctx.options):
        try:
            func = p(func, ctx)
        except TilecraftError:
            raise
        except (KeyboardInterrupt, MemoryError):
            raise
        except Exception as e:  # noqa: BLE001 - ours, not the user's: say so
            raise compiler_bug(e, p.__name__, func) from e
        for c in checks.get(p, ()):
            broken = c(func)
            if broken:
                raise InternalCompilerError(f"after {p.__name__}: {broken}", func.span)
        if ctx.dump is not None:
            ctx.dump(p.__name__, func)
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

"""A program with several `T.Kernel`s, on a GPU target: one kernel function per `T.Kernel`.

TileLang lets one `@T.prim_func` hold several `with T.Kernel(...)` blocks one after another
(split-K flash decoding: a split kernel, then a combine kernel that reads what the first wrote).
Their meaning is sequential: every block of a kernel finishes before the next kernel starts --
what the CPU target does by running them in order.  On CUDA each becomes its own `__global__`
function, compiled through the whole pass pipeline on its own (each has its own grid, threads,
shared memory and plan), and the runtime launches them in program order on one stream
(runtime/kernel.py: `SequenceLauncher`).  The parts keep the program's full signature (the same
buffers and symbols), so one argument check and one set of outputs serves every part.

Before: a PrimFunc whose body is a sequence holding more than one Kernel.
After: one PrimFunc per Kernel, named `<name>_<i>`, or None for a single-kernel program.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import TilecraftError
from ..ir import Kernel, stmts_of
from ..ir.func import PrimFunc
from ..ir.lowering import LoweringState


def split_kernels(func: PrimFunc) -> list | None:
    stmts = stmts_of(func.body)
    kernels = [s for s in stmts if isinstance(s, Kernel)]
    if len(kernels) < 2:
        return None
    stray = [s for s in stmts if not isinstance(s, Kernel)]
    if stray:
        raise TilecraftError(
            f"{func.name}: a program with {len(kernels)} T.Kernel blocks may hold nothing else at its top "
            f"level on a GPU target (found a {type(stray[0]).__name__} statement outside every T.Kernel): "
            f"move it into the kernel that needs it", getattr(stray[0], "span", None) or func.span)
    return [replace(func, name=f"{func.name}_{i}", body=k, lowering=LoweringState())
            for i, k in enumerate(kernels)]

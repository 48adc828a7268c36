"""Validation right after parsing: a program is valid and computes what it says, or it is refused
at its line with what is wrong -- before any lowering pass can loop, crash or leak an internal
exception on a user's mistake.

Before and after: the parsed IR, unchanged (these rules only check).  One file per concern, each a
`rule(func, target)` that raises `TilecraftError` at the offending statement:
- arch.py       constructs only some CUDA architectures have (tensor memory, tcgen05, clusters), on the others
- names.py      every scalar name has a value when the kernel runs (a T.dynamic used only as a tile size)
- extents.py    loop extents (TileLang's symbolic-T.Parallel rule, CUDA's constant extents) and grid sizes
- operators.py  operators on dtypes that have none (`<<` on a float), integer division by a constant 0,
                gemm operand and accumulator dtypes
- packed.py     what int4 (two per byte) supports: loads, stores, copies, casts, int4 x int4 -> int32 gemms
- accesses.py   global accesses -- loads, stores and atomics alike -- that can never be inside their tensor
- barriers.py   the threads of a T.tma_copy arrive on its mbarrier after it (how its transaction completes)
- limits.py     the target's limits (threads per block, grid dimensions, shared memory, CPU tile sizes)
                and the compiler's own budget (registers a fragment takes per thread)
The language functions (language/kernel.py, math.py, tileops.py) refuse what is wrong in a single call
(a float extent, `T.ceildiv(N, 0)`, `threads=128.0`) at parse time; these rules need the whole program.
"""
from __future__ import annotations

from ...ir.func import PrimFunc
from .accesses import check_accesses
from .arch import check_arch
from .barriers import check_tma_arrivals
from .extents import check_extents
from .limits import check_limits
from .names import check_names
from .operators import check_operators
from .packed import check_packed

RULES = (check_arch, check_names, check_extents, check_operators, check_packed, check_accesses, check_tma_arrivals, check_limits)


def validate(func: PrimFunc, ctx) -> PrimFunc:
    for rule in RULES:
        rule(func, ctx.target)
    return func

"""Reductions into shared tiles go through a register fragment (CUDA targets).

Before: `T.reduce_sum(src, dst, dim, clear)` with `dst` a shared tile (TileLang allows any on-chip
destination; DeepSeek's mHC backward reduces a fragment into a shared [tile, n] vector and a shared
tile into another).  The CUDA lowering of a reduction (cuda_ops/reduce.py) combines a thread's
registers, lanes and warps into a *fragment*.  After: such a reduction is

    tmp = T.alloc_fragment(dst.shape, dst.dtype)
    T.copy(dst, tmp)                      # only with clear=False: the values it folds into
    T.reduce_<kind>(src, tmp, dim, clear)
    T.copy(tmp, dst)

so the layout inference gives `tmp` the projection of the source's layout (or, for a shared
source, a default one), the copies are lowered and ordered by the barrier pass like any other,
and the result is the same elements.  Every other reduction is left as it is.  The CPU target
needs no such pass: its reductions write any buffer directly.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Alloc, Buffer, Copy, Mutator, Reduce, Region, seq
from ..ir.func import PrimFunc


class _Stage(Mutator):
    def __init__(self):
        super().__init__()
        self.n = 0

    def visit_Reduce(self, op: Reduce):
        if op.dst.scope != "shared":
            return op
        self.n += 1
        d = op.dst
        tmp = Buffer(f"{d.name}_red{self.n}", d.shape, d.dtype, "fragment", span=op.span)
        whole_d, whole_t = Region.whole(d), Region.whole(tmp)
        return seq(Alloc(tmp, span=op.span),
                   None if op.clear else Copy(whole_d, whole_t, span=op.span),
                   replace(op, dst=tmp),
                   Copy(whole_t, whole_d, span=op.span))


def stage_reduce_destinations(func: PrimFunc, ctx) -> PrimFunc:
    if func.body is None:
        return func
    body = _Stage().visit(func.body)
    return func if body is func.body else func.with_body(body)

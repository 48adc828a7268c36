"""Outputs the kernel only accumulates into.

A kernel's `out_idx` / `T.empty` outputs are allocated by the launcher without initialising them
(`torch.empty`, as TileLang does).  A kernel that only adds into one -- `T.atomic_add(dKV[...], v)`
and no store, copy or fill of `dKV` anywhere -- starts from whatever that memory held: on a GPU a
fresh allocation is often zeros, so the program seems right there, while on the CPU target (or
after the caching allocator reuses memory) it is garbage or NaN.  That is the program's mistake,
not the target's; it is said once per kernel, at the first atomic, with what to do.  A warning, not
an error: a caller may pass its own zeroed tensor through a different entry point.

Not a pipeline rule: it needs the kernel's `out_idx`, known when the JIT kernel is made (jit.py).
"""
from __future__ import annotations

import warnings

from ...ir import Visitor
from ...ir.expr import Ref
from ...ir.node import where
from ...ir.stmt import Store
from ...ir.tileop import AtomicAdd, TileOp


class UninitializedOutputWarning(UserWarning):
    """An output the launcher allocates uninitialised is only accumulated into by the kernel."""


class _Uses(Visitor):
    def __init__(self, outputs):
        self.outputs = outputs
        self.atomics: dict = {}    # buffer -> first AtomicAdd / atomic call into it
        self.written: set = set()  # buffers something else writes (a store, a copy, a fill, an intrinsic)
        self._call = None          # the intrinsic call being visited (its Refs are its operands)

    def generic(self, n):
        if isinstance(n, AtomicAdd):
            b = n.dst.buffer
            if b in self.outputs:
                self.atomics.setdefault(b, n)
        elif isinstance(n, TileOp):
            for r in n.writes():
                self.written.add(getattr(r, "buffer", r))
        elif isinstance(n, Store):
            self.written.add(n.buffer)
        elif isinstance(n, Ref):
            # the address of an element handed to an intrinsic: an atomic's target or anything else
            # (counted as written: nothing to say about what we cannot see)
            name = getattr(getattr(self._call, "intrinsic", None), "name", "") or ""
            if "atomic" in str(name) and n.buffer in self.outputs:
                self.atomics.setdefault(n.buffer, self._call)
            else:
                self.written.add(n.buffer)
        return Visitor.generic(self, n)

    def visit_IntrinsicCall(self, c):  # noqa: N802
        saved, self._call = self._call, c
        try:
            return self.generic(c)
        finally:
            self._call = saved


def warn_uninitialized_outputs(func, out_idx, stacklevel: int = 3) -> None:
    outputs = {func.params[i] for i in (out_idx or []) if 0 <= i < len(func.params)}
    if not outputs:
        return
    uses = _Uses(outputs)
    uses.visit(func.body)
    for b, node in uses.atomics.items():
        if b in uses.written:
            continue
        warnings.warn(
            f"{func.name}: output {b.name} is allocated uninitialised (out_idx / T.empty: torch.empty) and the kernel "
            f"only accumulates into it (the atomic at {where(getattr(node, 'span', None))}; nothing stores, copies "
            f"or fills it first): it starts from whatever that memory held -- often zeros on a GPU, garbage or NaN on "
            f"the CPU target. Clear it in the kernel (T.clear / a store of 0) or pass a zeroed tensor as an input.",
            UninitializedOutputWarning, stacklevel=stacklevel)

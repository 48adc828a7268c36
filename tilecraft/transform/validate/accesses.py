"""Global accesses that can never be inside their tensor.

Ragged edges are fine (transform/legalize_global_access.py guards them: a load outside reads 0, a
store or an atomic outside is dropped), but an access whose index is outside the tensor for every
block, thread and loop iteration -- `T.atomic_add(Out[j + 1000], v)` on a 64-element `Out` -- is a
mistake whose every effect would be dropped.  Loads, stores, atomics and tile-op regions get the same
check; an access under an `if` that tests one of its index's variables is left to that guard.
"""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import Load, Ref, Store, Var, collect
from ...ir.analysis import INF, bounds
from ...ir.printer import to_text
from ...ir.tileop import TileOp
from .walker import Walker


class _Accesses(Walker):
    def _guarded(self, exprs) -> bool:
        if not self.guards:
            return False
        guard_vars = {id(v) for g in self.guards for v in collect(g, lambda n: isinstance(n, Var))}
        return any(id(v) in guard_vars for e in exprs for v in collect(e, lambda n: isinstance(n, Var)))

    def _check(self, what, buf, starts, extents, node):
        if buf.scope != "global" or not buf.is_static or self._guarded(starts):
            return
        for d, (start, ext, size) in enumerate(zip(starts, extents, buf.shape)):
            lo, hi = bounds(start, self.env)
            if lo == -INF or hi == INF:
                continue
            if lo >= size or hi + ext - 1 < 0:
                raise TilecraftError(
                    f"{what} is never inside {buf.name} (shape {tuple(buf.shape)}): its index in dimension {d} "
                    f"runs from {lo} to {hi + ext - 1}, but the dimension has size {size}",
                    getattr(node, "span", None) or self.span,
                    hint="every element it would touch is outside the tensor, so all of its effect would be dropped")

    def visit_Load(self, e: Load):
        self._check(f"the load {to_text(e)}", e.buffer, e.indices, (1,) * len(e.indices), e)
        self.generic(e)

    def visit_Ref(self, e: Ref):
        self._check(f"the element {to_text(e)}", e.buffer, e.indices, (1,) * len(e.indices), e)
        self.generic(e)

    def visit_Store(self, s: Store):
        self._check(f"the store to {s.buffer.name}[{', '.join(to_text(i) for i in s.indices)}]",
                    s.buffer, s.indices, (1,) * len(s.indices), s)
        self.generic(s)

    def visit_TileOp(self, op: TileOp):
        name = type(op).__name__
        what = "T.atomic_" + op.kind if name == "AtomicAdd" else f"T.{name.lower()}"
        for region in op.reads() + op.writes():
            buf = getattr(region, "buffer", None)
            if buf is not None:
                self._check(f"{what} on {to_text(region)}", buf, region.starts, region.extents, op)
        self.generic(op)


def check_accesses(func, target) -> None:
    _Accesses(target).visit(func.body)

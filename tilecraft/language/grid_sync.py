"""`T.sync_grid()`: every block of the grid waits until all blocks reach it.

At the top level of a kernel body it splits the kernel into kernels that run one after the other
over the same grid (each block's writes to global memory are visible to every block of the next
kernel): exactly a grid barrier, with no co-residency requirement and the same meaning on every
target.  What cannot cross the barrier is on-chip state -- a shared tile, fragment or scalar
written before it and read after it before being written again -- because each part starts with
fresh registers and shared memory; such a program is refused at the read, as is a barrier inside
a loop or branch.

`split(kernel)` returns the parts (one Kernel per stretch between barriers; the top-level
allocations and annotations of the first stretch are repeated in every later part).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import TilecraftError
from ..ir import (Alloc, Annotate, Copy, Fill, For, Gemm, Kernel, Load, Reduce, Stmt, Store, Visitor, collect, seq,
                  stmts_of)


@dataclass(frozen=True, eq=False)
class GridSync(Stmt):
    """The marker `T.sync_grid()` leaves in a kernel body until `split` removes it."""


class _FirstAccess(Visitor):
    """The first access (in program order) of each on-chip buffer: ("write", node) when it defines the
    whole buffer, else ("read", node)."""
    _cache: dict = {}

    def __init__(self, watched: set):
        self.watched, self.first = watched, {}
        self.nest: list = []  # (var, extent) of the enclosing T.Parallel loops

    def _note(self, buf, kind, node):
        if buf in self.watched and buf not in self.first:
            self.first[buf] = (kind, node)

    def visit_For(self, f: For):
        self.nest.append((f.var, f.extent) if f.kind == "parallel" else None)
        Visitor.generic(self, f)
        self.nest.pop()

    def visit_Load(self, e: Load):
        Visitor.generic(self, e)
        self._note(e.buffer, "read", e)

    def visit_Store(self, s: Store):
        self.visit(s.value)
        for i in s.indices:
            self.visit(i)
        par = [n for n in self.nest if n is not None]
        whole = s.buffer.numel == 1 or (
            len(par) == len(s.indices) and all(i is v for i, (v, _) in zip(s.indices, par))
            and all(getattr(e, "value", None) == d for (_, e), d in zip(par, s.buffer.shape)))
        self._note(s.buffer, "write" if whole else "read", s)

    def visit_TileOp(self, op):
        for r in op.reads():
            self._note(r.buffer if hasattr(r, "buffer") else r, "read", op)
        defines = (isinstance(op, (Fill, Copy)) and op.writes()[0].covers_whole()) or \
                  (isinstance(op, Reduce) and op.clear) or (isinstance(op, Gemm) and op.clear_accum)
        for w in op.writes():
            self._note(w.buffer if hasattr(w, "buffer") else w, "write" if defines else "read", op)


def split(k: Kernel) -> list:
    stmts = stmts_of(k.body)
    nested = [s for s in stmts if not isinstance(s, GridSync) and collect(s, lambda n: isinstance(n, GridSync))]
    if nested:
        g = collect(nested[0], lambda n: isinstance(n, GridSync))[0]
        raise TilecraftError("T.sync_grid() is supported at the top level of a kernel body only (not inside a "
                             "loop or branch): there it splits the kernel into kernels launched in order", g.span)
    if not any(isinstance(s, GridSync) for s in stmts):
        return [k]
    parts, cur = [], []
    for s in stmts:
        if isinstance(s, GridSync):
            parts.append(cur)
            cur = []
        else:
            cur.append(s)
    parts.append(cur)
    shared_decls = [s for s in parts[0] if isinstance(s, (Alloc, Annotate))]
    declared = {s.buffer for s in shared_decls if isinstance(s, Alloc)}
    for part in parts[1:]:
        fa = _FirstAccess(declared)
        for s in part:
            fa.visit(s)
        for buf, (kind, node) in fa.first.items():
            if kind == "read":
                raise TilecraftError(
                    f"{buf.name} ({buf.scope}) is read after T.sync_grid() before being written again: on-chip "
                    f"values do not survive a grid barrier (each side runs as its own kernel)", node.span,
                    hint=f"write {buf.name} to a global tensor before the barrier and read it back after it, or "
                         f"define it again (T.clear / T.fill / T.copy into the whole of it) after the barrier")
    bodies = [parts[0]] + [shared_decls + p for p in parts[1:]]
    return [replace(k, body=seq(*b)) for b in bodies]

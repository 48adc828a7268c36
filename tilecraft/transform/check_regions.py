"""Reject on-chip accesses that can never be valid, at the user's line.

Before and after: the same IR (this pass only checks).  Shared, fragment and local tiles have no
bounds guards (they are registers and shared memory, where an out-of-range access silently
corrupts other data), so every tile-op region and every element index on them must provably lie
inside the buffer.  Global tensors are exempt: their ragged edges are guarded later.
"""
from __future__ import annotations

from ..errors import TilecraftError
from ..ir import For, Kernel, Let, Load, Store, Visitor
from ..ir.analysis import INF, bounds
from ..ir.func import PrimFunc
from ..ir.tileop import TileOp


class _Check(Visitor):
    def __init__(self):
        self.env = {}
        self.span = None

    def visit_Kernel(self, k: Kernel):
        for v, g in zip(k.block_vars, k.grid):
            self.env[v] = (0, bounds(g, self.env)[1] - 1)
        for v, t in zip(k.thread_vars, k.threads):
            self.env[v] = (0, t - 1)
        Visitor.generic(self, k)

    def visit_For(self, f: For):
        lo, hi = bounds(f.start, self.env)
        self.env[f.var] = (lo, hi + bounds(f.extent, self.env)[1] - 1)
        Visitor.generic(self, f)

    def visit_Let(self, s: Let):
        Visitor.generic(self, s)
        if s.var.dtype.is_int:
            self.env[s.var] = bounds(s.value, self.env)

    def _check_index(self, buf, indices, node):
        if buf.scope == "global":
            return
        for d, (idx, size) in enumerate(zip(indices, buf.shape)):
            lo, hi = bounds(idx, self.env)
            if (hi != INF and hi >= size) or (lo != -INF and lo < 0):
                raise TilecraftError(
                    f"index out of range: {buf.name} ({buf.scope}, shape {tuple(buf.shape)}) is indexed "
                    f"in dimension {d} with values from {lo} to {hi}, but the dimension has size {size}",
                    node.span or self.span)

    def visit_Load(self, e: Load):
        self._check_index(e.buffer, e.indices, e)
        Visitor.generic(self, e)

    def visit_Store(self, s: Store):
        self.span = s.span
        self._check_index(s.buffer, s.indices, s)
        Visitor.generic(self, s)

    def visit_TileOp(self, op: TileOp):
        self.span = op.span
        for region in op.reads() + op.writes():
            buf = getattr(region, "buffer", None)
            if buf is None or buf.scope == "global":
                continue
            for d, (start, ext, size) in enumerate(zip(region.starts, region.extents, buf.shape)):
                lo, hi = bounds(start, self.env)
                if ext > size or (hi != INF and hi + ext > size) or (lo != -INF and lo < 0):
                    raise TilecraftError(
                        f"region out of range: {buf.name} ({buf.scope}, shape {tuple(buf.shape)}) is "
                        f"accessed in dimension {d} from {lo} to {hi + ext - 1 if hi != INF else 'unbounded'} "
                        f"(extent {ext}), but the dimension has size {size}", op.span)
        Visitor.generic(self, op)


def check_regions(func: PrimFunc, target) -> PrimFunc:
    _Check().visit(func.body)
    return func

"""Loop extents and grid sizes.

- A T.Parallel loop whose extent is not a compile-time constant may not index a fragment or local
  buffer with its variable: which thread holds which element is fixed when the kernel is compiled,
  so such an index has no defined owner (TileLang's FragmentLoopChecker refuses it too).
- On CUDA every T.Parallel extent is a compile-time constant: the loop is split over the block's
  threads when the kernel is compiled.
- Grid dimensions within CUDA's limits (x < 2^31, y and z <= 65535), and never zero.
"""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import Const, For, Kernel, Load, Store, collect
from ...ir.printer import to_text
from .walker import Walker

GRID_LIMITS = (2**31 - 1, 65535, 65535)


def _uses(expr_tuple, var) -> bool:
    return any(collect(e, lambda n: n is var) for e in expr_tuple)


class _Extents(Walker):
    def check_for(self, f: For):
        if f.kind != "parallel" or isinstance(f.extent, Const):
            return
        for n in collect(f.body, lambda n: isinstance(n, (Load, Store)) and n.buffer.scope in ("fragment", "local")):
            if _uses(n.indices, f.var):
                raise TilecraftError(
                    f"T.Parallel over {to_text(f.extent)} (not a compile-time constant) indexes the "
                    f"{n.buffer.scope} buffer {n.buffer.name} with its loop variable: a {n.buffer.scope} buffer's "
                    f"elements are given to threads when the kernel is compiled, so an element picked by a run-time "
                    f"extent has no defined owner", f.span or self.span,
                    hint="give the T.Parallel loop a constant extent (the tile size) and guard the ragged end "
                         "with `if`, or loop with T.serial")
        if self.target.kind == "cuda":
            raise TilecraftError(
                f"T.Parallel over {to_text(f.extent)}: on CUDA a T.Parallel extent must be a compile-time "
                f"constant (the loop is split over the block's threads when the kernel is compiled)",
                f.span or self.span,
                hint="loop over the tile size and guard the ragged end: `for i in T.Parallel(BLOCK): "
                     "if i < n: ...`, or use T.serial for a run-time count")

    def enter_kernel(self, k: Kernel):
        for d, g in enumerate(k.grid):
            if isinstance(g, Const) and g.value <= 0:
                raise TilecraftError(f"T.Kernel grid dimension {d} is {g.value}: a grid needs at least one block "
                                     f"in each dimension", k.span)
            if self.target.kind == "cuda" and isinstance(g, Const) and g.value > GRID_LIMITS[d]:
                raise TilecraftError(
                    f"T.Kernel grid dimension {'xyz'[d]} is {g.value}, above CUDA's limit of {GRID_LIMITS[d]} "
                    f"blocks in that dimension", k.span,
                    hint="use larger tiles, or put the large count in the first grid dimension (up to 2^31 - 1)")


def check_extents(func, target) -> None:
    _Extents(target).visit(func.body)

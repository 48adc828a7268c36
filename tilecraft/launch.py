"""The launch record of a compiled CUDA kernel: everything the runtime needs to launch it, typed.

codegen/cuda.py makes one `LaunchRecord` per kernel from the lowered IR (never from the text it
printed): the kernel's name, its parameter kinds, the grid (a `Grid`: each extent an int or an
integer expression of the program's size symbols, evaluated by `Grid.__call__` -- no Python text is
compiled at run time), the block, the cluster dims, the dynamic shared bytes, the TMA descriptors
to build per call, the header features the source asks for, and the plan notes.  It travels in the
cache entry as JSON (`to_meta` / `from_meta`; the readable `grid` entries keep the program's
expressions as text beside their `grid_exprs` trees), and is covered by the cache key through the
compiler's own source hash (compiler/cache.py).  A cluster launch (dims other than 1, 1, 1) is for
the launcher to honour; until it does, it refuses one by name.
"""
from __future__ import annotations

import enum
import operator
from dataclasses import dataclass, field


class ParamKind(enum.StrEnum):
    PTR = "ptr"            # a tensor's data pointer, in signature order
    INT32 = "int32"        # a symbolic size, after the tensors
    INT64 = "int64"        # a symbolic size declared 64-bit (T.symbolic("n", "int64")): an int64_t parameter
    TMA_DESC = "tma_desc"  # a TMA tensor map passed by value (__grid_constant__), after the symbols


def symbol_param_kind(sym) -> ParamKind:
    """How a size symbol is passed: 64-bit when it was declared so (its values may pass 2^31), else int."""
    return ParamKind.INT64 if sym.dtype.is_int and sym.dtype.bits == 64 else ParamKind.INT32


class HeaderFeature(enum.StrEnum):
    """Optional parts of the device header library a kernel asks for (#define before the include)."""
    FP8 = "TC_FP8"   # the 8-bit float types (common.h)
    RNG = "TC_RNG"   # the Philox generator (random.h)
    IKET = "TC_IKET"  # the in-kernel trace log (iket.h; runtime/iket.py allocates and reads it)


_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod,
        "min": min, "max": max}


class GridError(ValueError):
    """A grid extent the launch record cannot express (compile time) or evaluate (a missing symbol)."""


def grid_tree(e):
    """An IR integer expression as a JSON-able tree: an int, a symbol name, or [op, a, b]."""
    from .ir import expr as E
    if isinstance(e, E.Const):
        return int(e.value)
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.Binary) and e.op in _OPS:
        return [e.op, grid_tree(e.a), grid_tree(e.b)]
    if isinstance(e, E.Cast) and e.dtype.is_int:
        return grid_tree(e.value)
    raise GridError(f"a grid extent must be an integer expression of the size symbols (+ - * // % min max), "
                    f"got {e}")


def eval_tree(tree, symbols: dict) -> int:
    if isinstance(tree, int):
        return tree
    if isinstance(tree, str):
        try:
            return int(symbols[tree])
        except KeyError:
            raise GridError(f"no value for symbol {tree!r}") from None
    op, a, b = tree
    return _OPS[op](eval_tree(a, symbols), eval_tree(b, symbols))


def _frozen_tree(tree):
    return tuple(_frozen_tree(x) for x in tree) if isinstance(tree, (list, tuple)) else tree


@dataclass(frozen=True)
class Grid:
    """The launch grid: three extents, each an int or a tree (`grid_tree`); `text` keeps the
    program's expressions for people (the launcher never reads it)."""
    trees: tuple
    text: tuple

    @classmethod
    def of(cls, exprs, texts) -> "Grid":
        trees = [grid_tree(e) for e in exprs] + [1] * (3 - len(exprs))
        return cls(tuple(_frozen_tree(t) for t in trees), tuple(texts) + (1,) * (3 - len(texts)))

    @property
    def static(self) -> tuple | None:
        """The grid when every extent is a constant, else None."""
        return self.trees if all(isinstance(t, int) for t in self.trees) else None

    def __call__(self, symbols: dict) -> tuple:
        return tuple(eval_tree(t, symbols) for t in self.trees)


@dataclass(frozen=True)
class LaunchRecord:
    kernel_name: str
    grid: Grid
    block: tuple
    smem_bytes: int
    param_kinds: tuple           # ParamKind per kernel parameter, in order
    tma: tuple = ()              # TmaDescriptor per TMA parameter (ir/lowering.py)
    cluster: tuple = (1, 1, 1)
    features: frozenset = field(default_factory=frozenset)   # HeaderFeature the source defines
    plan: tuple = ()             # the plan notes (kernel.get_plan())

    def to_meta(self) -> dict:
        """The record as the cache entry's JSON metadata."""
        meta = {"kernel_name": self.kernel_name, "grid": list(self.grid.text), "block": list(self.block),
                "smem_bytes": int(self.smem_bytes), "param_kinds": [str(k) for k in self.param_kinds]}
        if self.grid.static is None:
            meta["grid_exprs"] = [_json_tree(t) for t in self.grid.trees]
        if self.tma:
            meta["tma"] = [d.to_meta() for d in self.tma]
        if tuple(self.cluster) != (1, 1, 1):
            meta["cluster"] = list(self.cluster)
        meta["plan"] = list(self.plan)
        return meta


def _json_tree(t):
    return [_json_tree(x) for x in t] if isinstance(t, tuple) else t


def grid_of_meta(meta: dict) -> Grid:
    """The grid of a cache entry's metadata: its `grid_exprs` trees, or its constant `grid`."""
    grid = list(meta.get("grid", (1, 1, 1)))
    trees = meta.get("grid_exprs")
    if trees is None:
        if not all(isinstance(g, int) for g in grid):
            raise GridError(f"grid {grid!r} has expressions but no grid_exprs (a record from an older tilecraft)")
        trees = grid
    if len(trees) != 3 or len(grid) != 3:
        raise GridError(f"grid {grid!r} must have three entries")
    return Grid(tuple(_frozen_tree(t) for t in trees), tuple(grid))

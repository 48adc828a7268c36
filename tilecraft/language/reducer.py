"""TileLang's reducer family: `T.alloc_reducer(shape, dtype, op)`, `T.reducer_init(r, init=None)`,
`T.reducer_update(r[i], value)` (inside a `T.Parallel` loop) and `T.finalize_reducer(r, dst=None)`.

A reducer is a tile whose elements each combine many contributions with `op` (sum, max, min, bitand,
bitor, bitxor).  TileLang gives every participating thread a private partial and combines them at
finalize; tilecraft keeps one copy per block (the CPU target runs each statement over the whole tile),
so the partials never exist and the result is the same:

- `reducer_init(r, init)` sets every element to `init` (TileLang: the combine identity, with `init`
  combined in once), or to the identity when no `init` is given;
- `reducer_update(r[i], v)` is `r[i] = op(r[i], v)`;
- `finalize_reducer(r, dst)` copies the result into `dst` (without `dst`: nothing left to do).

On the CUDA target a `T.Parallel` loop whose iterations update one element from several threads is
refused at layout inference, by name (the per-thread partials TileLang would make are not built)."""
from __future__ import annotations

from ..ir import Buffer, Load, Store, as_expr, binary, cast
from .builder import error, require_kernel

OPS = ("sum", "max", "min", "bitand", "bitor", "bitxor")
_COMBINE = {"sum": "+", "max": "max", "min": "min", "bitand": "&", "bitor": "|", "bitxor": "^"}


def _ops(b) -> dict:
    if not hasattr(b, "reducer_ops"):
        b.reducer_ops = {}
    return b.reducer_ops


def alloc_reducer(shape, dtype, op="sum", replication=None):
    from .kernel import _alloc
    b = require_kernel("T.alloc_reducer")
    if op not in OPS:
        raise error(f"T.alloc_reducer: op must be one of {', '.join(OPS)}, got {op!r}")
    buf = _alloc(shape, dtype, "fragment", "T.alloc_reducer")
    if op.startswith("bit") and not buf.dtype.is_int:
        raise error(f"T.alloc_reducer: a {op} reducer holds integers, got {buf.dtype}")
    _ops(b)[buf] = op
    return buf


def _reducer(b, r, what) -> tuple:
    if not isinstance(r, Buffer) or r not in _ops(b):
        raise error(f"{what} expects a buffer made by T.alloc_reducer, got {r!r}")
    return r, _ops(b)[r]


def identity(op: str, d):
    """The value that leaves any contribution unchanged under `op`, in dtype `d`."""
    from .math import has_infinity, max_value, min_value
    if op == "max":
        return as_expr(float("-inf"), d) if has_infinity(d) else min_value(d)
    if op == "min":
        return as_expr(float("inf"), d) if has_infinity(d) else max_value(d)
    if op == "bitand":
        return as_expr(-1 if d.kind == "int" else (1 << d.bits) - 1, d)
    return as_expr(0, d)


def reducer_init(reducer, init=None):
    from .tileops import fill
    b = require_kernel("T.reducer_init")
    r, op = _reducer(b, reducer, "T.reducer_init")
    fill(r, identity(op, r.dtype) if init is None else init)


def reducer_update(target, value):
    b = require_kernel("T.reducer_update")
    if not isinstance(target, Load):
        raise error(f"T.reducer_update expects `acc[indices]` of a T.alloc_reducer buffer first, got {target!r}")
    r, op = _reducer(b, target.buffer, "T.reducer_update")
    v = cast(as_expr(value, r.dtype), r.dtype)
    b.emit(Store(r, target.indices, cast(binary(_COMBINE[op], Load(r, target.indices), v), r.dtype), span=b.span))


def finalize_reducer(reducer, dst=None, batch=1, annotations=None):
    """Close the reducer's epoch; with `dst`, the result is copied there (same shape and dtype)."""
    from .tileops import copy
    b = require_kernel("T.finalize_reducer")
    if not isinstance(reducer, Buffer) or reducer.scope not in ("fragment", "local"):
        raise error(f"T.finalize_reducer expects a buffer made by T.alloc_reducer, got {reducer!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise error(f"T.finalize_reducer: batch must be an int >= 1, got {batch!r}")
    if dst is None:
        return
    if not isinstance(dst, Buffer) or tuple(dst.shape) != tuple(reducer.shape) or dst.dtype is not reducer.dtype:
        raise error(f"T.finalize_reducer: dst must be a tile of {reducer.name}'s shape {tuple(reducer.shape)} and "
                    f"dtype {reducer.dtype}, got {dst!r}")
    copy(reducer, dst)


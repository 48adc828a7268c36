"""The integer width of index arithmetic: 64-bit wherever a tensor can have more than 2^31 elements
along the dimension being indexed.

Index expressions are built in the operands' type, usually `int` (block and thread indices, loop
variables, Python ints): `bx * 512 + i` overflows `int` once it passes 2^31, so a tensor with more
elements than that would be read and written at wrapped addresses (on the CPU target, a segfault;
on a GPU, an out-of-bounds write).  The rule, applied where addresses and bounds checks are
printed (codegen/c_printer.py and the CUDA printer):

- a dimension is *wide* when its extent can exceed int32: a symbolic extent of a 64-bit type
  (`T.symbolic("n", "int64")`, any int64 expression) or a static extent >= 2^31.  An index into a
  wide dimension is computed in int64 from its leaves up (`(int64_t)bx * 512 + (int64_t)i`):
  `widen` rebuilds its signed integer arithmetic in int64, through the lets it was written with
  (the kernel's `g = bx * 512 + i`, the hoisted `tc_h0` of transform/hoist_invariants.py), whose own
  int value may have wrapped;
- a buffer whose total size can exceed int32 (static numel >= 2^31, or any symbolic extent) forms
  its row-major offset in int64: each dimension's index is cast before it is scaled by its stride
  (an index into a dimension of int32 extent fits int32 itself);
- a cast of signed 32-bit arithmetic to int64 (a bounds check `bx * 512 + i < n` against an int64
  extent promotes its left side so) is printed as that arithmetic widened, not as the cast of a
  wrapped int.

Buffers with small static shapes keep their `int` arithmetic, so their generated code is unchanged.
"""
from __future__ import annotations

from . import dtype as dt
from .expr import Binary, Cast, Const, Expr, Select, Unary, Var, binary, cast, const, select, unary

INT32_LIMIT = 2 ** 31
_ARITH = ("+", "-", "*", "//", "%", "min", "max")


def wide_extent(extent) -> bool:
    """Whether a dimension of this extent can hold more than 2^31 - 1 elements."""
    if isinstance(extent, int):
        return extent >= INT32_LIMIT
    return isinstance(extent, Expr) and extent.dtype.bits > 32


def wide_dims(buf) -> tuple:
    """Per dimension of `buf`: whether its index must be computed in int64."""
    return tuple(wide_extent(s) for s in buf.shape)


def wide_offset(buf) -> bool:
    """Whether `buf`'s row-major offset must be formed in int64 (its size may exceed int32)."""
    if buf.is_static:
        n = 1
        for s in buf.shape:
            n *= s
        return n >= INT32_LIMIT
    return True


def _signed_int(d) -> bool:
    return d.kind == "int" and d.bits <= 64


def widening_cast(e) -> bool:
    """A cast to int64 of signed <= 32-bit arithmetic, which `widen` prints without wrapping."""
    return (isinstance(e, Cast) and e.dtype.kind == "int" and e.dtype.bits == 64
            and _signed_int(e.value.dtype) and e.value.dtype.bits <= 32
            and isinstance(e.value, (Binary, Select, Unary, Var)))


def widen(e, lets: dict | None = None) -> Expr:
    """`e` (an integer index expression) computed in int64 from its leaves up."""
    lets = lets or {}
    if isinstance(e, int):
        return const(e, dt.int64)
    return _widen(e, lets, 0)


def _widen(e: Expr, lets: dict, depth: int) -> Expr:
    d = e.dtype
    if isinstance(e, Const) and d.kind == "int":
        return const(e.value, dt.int64)
    if isinstance(e, Binary) and e.op in _ARITH and _signed_int(d):
        return binary(e.op, _widen(e.a, lets, depth), _widen(e.b, lets, depth), span=e.span)
    if isinstance(e, Select) and _signed_int(d):
        return select(e.cond, _widen(e.a, lets, depth), _widen(e.b, lets, depth), span=e.span)
    if isinstance(e, Unary) and e.op == "neg" and _signed_int(d):
        return unary("neg", _widen(e.a, lets, depth), span=e.span)
    if isinstance(e, Cast) and e.dtype.kind == "int" and e.dtype.bits == 64 and _signed_int(e.value.dtype):
        return _widen(e.value, lets, depth)
    if isinstance(e, Var) and e in lets and depth < 64 and _signed_int(d):
        return _widen(lets[e], lets, depth + 1)   # the let's own int value may have wrapped
    if d.kind == "int" and d.bits == 64:
        return e
    return cast(e, dt.int64)

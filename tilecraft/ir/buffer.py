"""Buffers (tensors and tiles) and rectangular regions of them.

A `Buffer` is a named, typed, shaped array in one memory scope:

- ``global``: a kernel parameter in device memory (a torch tensor at call time);
- ``shared``: a tile in shared memory, one per block;
- ``fragment``: a tile spread over the registers of the block's threads (layout inferred);
- ``local``: a per-thread register array; ``var``: a per-thread scalar (shape ``(1,)``).

A `Region` is a buffer plus, per dimension, a start expression and a static extent: the operand
of a tile operation such as `copy`.
"""
from __future__ import annotations

from dataclasses import dataclass

from .dtype import DType
from .expr import Expr, Load, Var, as_expr, const
from .node import Node, same, same_seq

SCOPES = ("global", "shared", "fragment", "local", "var")


@dataclass(frozen=True, eq=False)
class Buffer(Node):
    name: str
    shape: tuple  # ints, or Vars for symbolic dimensions of global tensors
    dtype: DType
    scope: str = "global"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            if not isinstance(s, int):
                raise TypeError(f"{self.name} has a symbolic shape")
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return (self.numel * self.dtype.bits + 7) // 8   # int4: two per byte

    @property
    def is_static(self) -> bool:
        return all(isinstance(s, int) for s in self.shape)

    def strides(self) -> tuple:
        """Row-major strides (elements); ints when static, expressions otherwise."""
        from .expr import binary
        out, acc = [], 1
        for s in reversed(self.shape):
            out.append(acc)
            acc = acc * s if isinstance(acc, int) and isinstance(s, int) else binary("*", as_expr(acc), s)
        return tuple(reversed(out))

    # A `T.alloc_var` scalar handed to a Python helper acts as its value (`s == 1`, `s + 1`,
    # `abs(s)` build IR, `bool(s)` is refused as for any kernel value); any other buffer compares
    # by identity (buffers key the compiler's dicts) and has no arithmetic.
    __hash__ = Node.__hash__

    def __eq__(self, other):
        if self.scope == "var" and isinstance(other, (Expr, int, float)):
            return self.value() == other
        return self is other

    def __ne__(self, other):
        if self.scope == "var" and isinstance(other, (Expr, int, float)):
            return self.value() != other
        return self is not other

    def __bool__(self):
        if self.scope == "var":
            return bool(self.value())
        return True

    def value(self) -> Expr:
        """The element of a `T.alloc_var` scalar, as an expression."""
        return Load(self, (const(0),))

    def __getitem__(self, key):
        """`buf[i, j]` / `buf[i, a:b]` in a plain Python helper called from a kernel body (TileLang's
        buffers index so there too): one element as a Load, or a Region when an index is a slice (its
        extent a compile-time constant).  The kernel body's own subscripts are parsed
        (language/parse_expr.py) and give the same nodes."""
        from ..errors import TilecraftError as _Error
        from .analysis import share_equal, static_difference
        from .pyops import _span, user_frame
        span = _span(user_frame(2))   # the helper's line

        def TilecraftError(msg, hint=None):  # noqa: N802 - the error at the helper's line
            return _Error(msg, span, hint=hint)
        items = key if isinstance(key, tuple) else (key,)
        if len(items) > self.ndim:
            raise TilecraftError(f"{self.name} has {self.ndim} dimension(s) but is indexed with {len(items)}")
        starts, extents, region = [], [], False
        for d, it in enumerate(items):
            if isinstance(it, slice):
                region = True
                if it.step not in (None, 1):
                    raise TilecraftError(f"slices of {self.name} must have step 1")
                lo = 0 if it.start is None else it.start
                hi = self.shape[d] if it.stop is None else it.stop
                lo, hi = (x.value() if isinstance(x, Buffer) and x.scope == "var" else x for x in (lo, hi))
                ext = static_difference(*share_equal(hi, lo), exact_division=True)
                if ext is None or ext <= 0:
                    raise TilecraftError(f"the slice {lo}:{hi} of {self.name} (dimension {d}) must have a positive "
                                         f"compile-time extent", "write it as start:start + EXTENT")
                starts.append(as_expr(lo))
                extents.append(ext)
                continue
            if isinstance(it, Buffer) and it.scope == "var":
                it = it.value()
            if isinstance(it, bool) or not (isinstance(it, int) or isinstance(it, Expr) and it.dtype.is_int):
                raise TilecraftError(f"index {it!r} of {self.name} must be an integer")
            starts.append(as_expr(it))
            extents.append(1)
        for d in range(len(items), self.ndim):
            region = True
            starts.append(const(0))
            extents.append(self.shape[d])
        if region:
            return Region(self, tuple(starts), tuple(extents), span=span)
        return Load(self, tuple(starts), span=span)

    def __repr__(self) -> str:
        shape = ", ".join(str(s.name) if isinstance(s, Var) else str(s) for s in self.shape)
        return f"{self.name}: {self.scope} {self.dtype}[{shape}]"


@dataclass(frozen=True, eq=False)
class Region(Node):
    """`buffer[starts[d] : starts[d] + extents[d]]` for every dimension d (extents are ints)."""
    buffer: Buffer
    starts: tuple
    extents: tuple

    @staticmethod
    def whole(buffer: Buffer) -> "Region":
        return Region(buffer, tuple(const(0) for _ in buffer.shape), tuple(buffer.shape))

    @property
    def shape(self) -> tuple:
        return tuple(self.extents)

    def squeezed_shape(self) -> tuple:
        """Extents with unit dimensions dropped: the tile shape a copy matches on."""
        return tuple(e for e in self.extents if not same(e, 1))

    @property
    def numel(self) -> int:
        n = 1
        for e in self.extents:
            n *= e
        return n

    def covers_whole(self) -> bool:
        from .expr import is_const
        return all(is_const(s, 0) for s in self.starts) and same_seq(self.extents, self.buffer.shape)


def _scalar_operator(name):
    def op(self, *args):
        if self.scope != "var":
            return NotImplemented
        return getattr(self.value(), name)(*args)
    op.__name__ = name
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
              "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__divmod__",
              "__rdivmod__", "__pow__", "__rpow__", "__lt__", "__le__", "__gt__", "__ge__", "__and__",
              "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__lshift__", "__rlshift__",
              "__rshift__", "__rrshift__", "__neg__", "__invert__", "__abs__", "__round__", "__floor__",
              "__ceil__", "__trunc__", "__int__", "__float__"):
    setattr(Buffer, _name, _scalar_operator(_name))

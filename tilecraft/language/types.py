"""Type-level pieces of the language: tensor annotations, symbolic sizes, dtypes, warp policies."""
from __future__ import annotations

import enum

from ..errors import TilecraftError
from ..ir import Var, dtype as dt
from ..ir.dtype import DType
from .builder import active, caller_span


class BufferData:
    """`X.data` of a global tensor X inside a kernel: its storage, to be seen with another shape by
    `T.Tensor(shape, dtype, X.data)`."""

    def __init__(self, buffer):
        self.buffer = buffer


class ShapeEntryError(TilecraftError, TypeError):
    """A `T.Tensor` shape entry that is no size (a negative or float number): a TilecraftError at the
    user's line, and a TypeError as before."""


class TensorSpec:
    """The value of a parameter annotation `T.Tensor(shape, dtype)`: shape entries are ints or
    `T.dynamic` symbols.  Inside a kernel, `T.Tensor(shape, dtype, X.data)` is instead a view of the
    global tensor X with that shape (`view`)."""

    def __new__(cls, shape=None, dtype="float32", data=None, **_ignored):
        if data is not None:
            return view(shape, dtype, data)
        return super().__new__(cls)

    def __init__(self, shape, dtype="float32", data=None, **_ignored):
        if isinstance(shape, (int, Var)):
            shape = (shape,)
        self.shape = tuple(shape)
        try:
            self.dtype = dt.dtype(dtype)
        except TilecraftError as e:
            # In a parsed annotation the parser adds the span; an annotation Python evaluates
            # itself (no `from __future__ import annotations`) runs at the user's `def` line.
            raise type(e)(f"T.Tensor: {e.message}", None if active() else caller_span(), hint=e.hint) from None
        from .dtypes import require_computable
        require_computable(self.dtype, "T.Tensor")
        from .eager import shape_entry_ok
        for s in self.shape:
            if not shape_entry_ok(s):
                raise ShapeEntryError(f"T.Tensor shape entries must be non-negative ints, T.const names or "
                                      f"T.dynamic symbols, got {s!r}", None if active() else caller_span())
        if self.dtype.packed:
            _packed_last_dim(self.shape, self.dtype)

    def __class_getitem__(cls, item):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], (str, DType)):
            return cls(item[0], item[1])
        return cls(item)

    def __repr__(self):
        return f"T.Tensor({self.shape}, {self.dtype})"


def _packed_last_dim(shape, d) -> None:
    """An int4 tensor is a torch int8 tensor with two elements per byte along its last dimension
    (TileLang's packing): that dimension must be a static even size (an eager function's T.const sizes: checked when bound)."""
    from .eager import _SCOPE
    last = shape[-1] if shape else None
    if isinstance(last, int) and last % 2 == 0 or not isinstance(last, int) and _SCOPE.get() is not None:
        return   # an eager function's sizes are checked when its call binds them (runtime/args.py)
    why = (f"its last dimension {last} is odd" if isinstance(last, int) else
           "it has no dimensions" if last is None else f"its last dimension {last} is symbolic")
    raise TilecraftError(
        f"T.Tensor({shape}, {d}): {why}; an {d} tensor is passed as a torch int8 tensor holding two "
        f"elements per byte along the last dimension, which must be a static even size",
        None if active() else caller_span(),
        hint="give the last dimension as an even int; pack with (lo & 0xF) | (hi << 4) into shape (..., last // 2)")


def view(shape, dtype, data):
    """`T.Tensor(shape, dtype, X.data)` in a kernel: X's elements, row-major, seen with `shape`
    (the same dtype and number of elements; X is a kernel parameter)."""
    from ..ir import View, Buffer as IRBuffer
    from .builder import error, require_kernel
    b = require_kernel("T.Tensor(shape, dtype, X.data)")
    if not isinstance(data, BufferData):
        raise error(f"T.Tensor(shape, dtype, data): data must be a global tensor's storage `X.data`, got {data!r}")
    base = data.buffer
    if isinstance(shape, (int, Var)):
        shape = (shape,)
    shape = tuple(shape)
    try:
        d = dt.dtype(dtype)
    except TilecraftError as e:
        raise error(f"T.Tensor: {e.message}") from None
    if d != base.dtype:
        raise error(f"T.Tensor(..., {base.name}.data): a view keeps the element type: {base.name} holds {base.dtype}, "
                    f"the view asks for {d}", hint=f"view {base.name} as {base.dtype} and convert elements with T.cast")
    if any(not isinstance(s, int) or s < 0 for s in shape):
        raise error(f"T.Tensor(..., {base.name}.data): the view's shape must be non-negative ints, got {shape}")
    n = 1
    for s in shape:
        n *= s
    if all(isinstance(s, int) for s in base.shape) and n != base.numel:
        raise error(f"T.Tensor({shape}, ..., {base.name}.data): the view has {n} elements but {base.name} "
                    f"{tuple(base.shape)} has {base.numel}")
    buf = IRBuffer(b.fresh_name(getattr(b, "pending_name", None) or f"{base.name}_view"), shape, d, "global",
                   span=b.span)
    b.emit(View(buf, base, span=b.span))
    return buf


Tensor = TensorSpec
Buffer = TensorSpec


def StridedTensor(shape, strides=None, dtype="float32"):  # noqa: N802 - TileLang spelling
    # Only contiguous strides are supported for now; the argument is accepted for API parity.
    return TensorSpec(shape, dtype)


def dynamic(name: str, dtype="int32"):
    """A symbolic dimension bound from the argument's shape at call time; several names at once
    (`T.dynamic("m, n")`, TileLang's spelling) return a tuple."""
    from .eager import split_names
    names = split_names(name) if isinstance(name, str) else [name]
    if len(names) > 1:
        return tuple(Var(n, dt.dtype(dtype)) for n in names)
    return Var(name.strip() if isinstance(name, str) else name, dt.dtype(dtype))


symbolic = dynamic


class GemmWarpPolicy(enum.Enum):
    """How the block's warps split the gemm tile: a square-ish grid, all along M, or all along N."""
    Square = "Square"
    FullRow = "FullRow"
    FullCol = "FullCol"

    def __str__(self):
        return self.value


float16 = dt.float16
bfloat16 = dt.bfloat16
float32 = dt.float32
float64 = dt.float64
float8_e4m3fn = dt.float8_e4m3fn
float8_e5m2 = dt.float8_e5m2
int8 = dt.int8
int16 = dt.int16
int32 = dt.int32
int64 = dt.int64
uint8 = dt.uint8
uint16 = dt.uint16
uint32 = dt.uint32
uint64 = dt.uint64
boolean = dt.bool_

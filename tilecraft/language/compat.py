"""Smaller pieces of TileLang's `T.*` surface: dtype spellings and conversions (`T.dtype`,
`T.Cast`, `T.clamp`), buffer annotations for `@T.macro` parameters (`T.SharedBuffer`, ...),
`T.attr` scopes.

Every function builds ordinary tile IR through the existing helpers; nothing here adds an IR node.
"""
from __future__ import annotations

import warnings

from ..ir import dtype as dt
from ..ir.dtype import DType
from .builder import error
from .math import cast, max as _max, min as _min
from .types import TensorSpec


def dtype(value) -> DType:
    """`T.dtype("float16")` / `dtype: T.dtype = T.float16`: the interned dtype of any spelling."""
    try:
        return dt.dtype(value)
    except ValueError as e:
        raise error(f"T.dtype: {getattr(e, 'message', e)}", hint=getattr(e, "hint", None)) from None


def Cast(dtype, value):  # noqa: N802 - TVM's spelling: the dtype comes first
    """`T.Cast(dtype, x)`: x converted to dtype (same as `T.cast(x, dtype)`)."""
    return cast(value, dtype)


def clamp(x, lo, hi):
    """`T.clamp(x, lo, hi)`: min(max(x, lo), hi), in x's dtype."""
    return _min(_max(x, lo), hi)


def astype(x, dtype):
    """`x.astype("float32")` on a kernel value (the parser routes the method here)."""
    return cast(x, dtype)


class _BufferAnnotation(TensorSpec):
    """`T.SharedBuffer(shape, dtype)` and friends: annotations of `@T.macro` parameters (a macro
    binds whatever buffer it is called with; the annotation documents it)."""

    scope = "global"

    def __init__(self, shape, dtype="float32", *args, **kwargs):
        if isinstance(shape, list):
            shape = tuple(shape)
        super().__init__(shape, dtype)


class SharedBuffer(_BufferAnnotation):
    scope = "shared"


class FragmentBuffer(_BufferAnnotation):
    scope = "fragment"


class LocalBuffer(_BufferAnnotation):
    scope = "local"


class AttrScope:
    """`with T.attr(node, key, value):` -- a scheduling hint for TVM; the body is parsed as if the
    `with` were not there.  Known keys pass silently when they cannot change results; others warn once."""

    HINTS = {"async_scope", "pragma_unroll_explicit", "pragma_import_c", "thread_extent", "reduce_scope"}
    _warned: set = set()

    def __init__(self, node, key, value):
        self.node, self.key, self.value = node, key, value
        if key not in self.HINTS and key not in self._warned:
            self._warned.add(key)
            warnings.warn(f"T.attr(..., {key!r}, ...) is ignored: tilecraft has no TVM attribute {key!r}",
                          UserWarning, stacklevel=3)


def attr(node, key, value):
    return AttrScope(node, key, value)


# ---- newer TileLang spellings -----------------------------------------------------------------

def annotate_restrict_buffers(*buffers):
    """`T.annotate_restrict_buffers(A, B)`: already so -- tilecraft declares every tensor parameter
    `__restrict__` (tensors passed to one kernel must not overlap, which the launcher checks)."""
    from .builder import require_kernel
    require_kernel("T.annotate_restrict_buffers")


def pdl_trigger():
    """`T.pdl_trigger()`: programmatic dependent launch lets the next kernel start early.  tilecraft
    launches without it, so the next kernel starts when this one ends: nothing to trigger."""
    from .builder import require_kernel
    require_kernel("T.pdl_trigger")


def pdl_sync():
    """`T.pdl_sync()`: wait for the previous kernel's results.  Without programmatic dependent launch
    they are complete before this kernel starts, so the wait is already satisfied."""
    from .builder import require_kernel
    require_kernel("T.pdl_sync")


def index_to_coordinates(index, shape):
    """The row-major coordinates of flat `index` in `shape` (TileLang's `T.index_to_coordinates`)."""
    from ..ir import binary
    out = []
    for n in reversed(tuple(shape)[1:]):
        out.append(binary("%", index, n))
        index = binary("//", index, n)
    return [index] + out[::-1]


def _lanes(x, n, what):
    """The `n` consecutive elements (along the last dimension) starting at element `x`."""
    from ..ir import Load
    from .lowlevel import run_of
    if not isinstance(x, Load):
        raise error(f"{what} is a buffer element such as x[i, j] (its {n} neighbours along the last dimension "
                    f"go with it), got {x!r}")
    return run_of(x.buffer, x.indices, n)


def _atomic_add_lanes(n, dst, value, memory_order=None, return_prev=False):
    from .tileops import _atomic, _atomic_options
    what = f"T.atomic_addx{n}"
    if return_prev:
        raise error(f"{what}(..., return_prev=True): the previous values of {n} elements are not returned; "
                    f"use T.atomic_add(..., return_prev=True) per element")
    _atomic_options("add", memory_order, False)
    for d, v in zip(_lanes(dst, n, f"{what}: the destination"), _lanes(value, n, f"{what}: the value")):
        _atomic("add", d, v)


def atomic_addx2(dst, value, memory_order=None, return_prev=False):
    """`T.atomic_addx2(dst[i], src[j])`: dst[i:i+2] += src[j:j+2], each element atomically."""
    _atomic_add_lanes(2, dst, value, memory_order, return_prev)


def atomic_addx4(dst, value, memory_order=None, return_prev=False):
    """`T.atomic_addx4(dst[i], src[j])`: dst[i:i+4] += src[j:j+4], each element atomically."""
    _atomic_add_lanes(4, dst, value, memory_order, return_prev)


def _elements(buffer, what):
    """Each element of a local buffer (or of a slice of one) as a bool."""
    import itertools

    from ..ir import Buffer, Load, Region, binary, cast
    from ..ir import dtype as dt
    region = Region.whole(buffer) if isinstance(buffer, Buffer) else buffer
    if not isinstance(region, Region):
        raise error(f"{what} takes a local buffer or a slice of one, got {buffer!r}")
    buf = region.buffer
    if buf.scope not in ("local", "var", "global", "shared"):
        raise error(f"{what}: {buf.name} is a {buf.scope} buffer; {what} reads the elements in the thread that "
                    f"runs it (a local, global or shared buffer), and a fragment's elements are spread over "
                    f"threads", hint="reduce a fragment with T.reduce_max / T.reduce_min")
    if not all(isinstance(n, int) for n in region.extents):
        raise error(f"{what}: the slice of {buf.name} must have compile-time extents, got {tuple(region.extents)}")
    if region.numel > 4096:
        raise error(f"{what}: {buf.name}'s slice has {region.numel} elements; {what} reads each one in the calling "
                    f"thread, so it takes at most 4096", hint="reduce a larger tile with T.reduce_max into a fragment")
    return [cast(Load(buf, tuple(binary("+", s, o) for s, o in zip(region.starts, offs))), dt.bool_)
            for offs in itertools.product(*[range(n) for n in region.extents])]


def _fold(op, values):
    from ..ir import binary
    out = values[0]
    for v in values[1:]:
        out = binary(op, out, v)
    return out


def any_of(buffer):
    """True when any element of the buffer (or slice) is nonzero: a local, global or shared buffer,
    read by the thread that evaluates it."""
    return _fold("or", _elements(buffer, "T.any_of"))


def all_of(buffer):
    """True when every element of the buffer (or slice) is nonzero (local, global or shared)."""
    return _fold("and", _elements(buffer, "T.all_of"))


def assume(cond=None):
    """`T.assume(cond)`: the program promises `cond` holds where it is written, so TVM's simplifier may
    use it.  tilecraft's simplifier does not take such facts, so nothing changes: for a program whose
    promise holds the result is the same.  A promise known false at compile time is an error."""
    from ..ir import Const, Expr
    from .builder import current
    current("T.assume")
    if cond is None:
        return None
    if isinstance(cond, Const):
        cond = cond.value
    if isinstance(cond, (bool, int)) and not isinstance(cond, Expr):
        if not cond:
            raise error("T.assume: the condition is false at compile time")
        return None
    if not isinstance(cond, Expr):
        raise error(f"T.assume takes a condition (a boolean expression), got {cond!r}")
    return None

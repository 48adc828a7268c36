"""Smaller pieces of TileLang's `T.*` surface: dtype spellings and conversions (`T.dtype`,
`T.Cast`, `T.clamp`), buffer annotations for `@T.macro` parameters (`T.SharedBuffer`, ...),
`T.attr` scopes, and clear errors for the manual Hopper constructs tilecraft does not have yet.

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


def finalize_reducer(reducer):
    """`T.finalize_reducer(buf)` after a `T.Parallel` loop that accumulated into a `T.alloc_reducer`
    buffer: combine the per-thread partial results.  The statements of a tilecraft kernel keep one
    copy of a reducer buffer per block (the CPU target runs each statement over the whole tile), so
    there are no per-thread partials left to combine; the CUDA target refuses a loop that would
    accumulate into one element from several threads, by name, at layout inference."""
    from ..ir import Buffer
    from .builder import require_kernel
    require_kernel("T.finalize_reducer")
    if not isinstance(reducer, Buffer) or reducer.scope not in ("fragment", "local"):
        raise error(f"T.finalize_reducer expects a buffer made by T.alloc_reducer, got {reducer!r}")


def attr(node, key, value):
    return AttrScope(node, key, value)


def _unsupported(name, why):
    def f(*args, **kwargs):
        raise error(f"T.{name} is not supported by tilecraft yet: {why}",
                    hint="tilecraft plans barriers, TMA and warp roles itself: write the program with "
                         "T.copy / T.gemm inside T.Pipelined and let the compiler pipeline it")
    f.__name__ = name
    return f


_HOPPER = "a manual Hopper construct (TMA copies and wgmma issued by hand)"
tma_copy = _unsupported("tma_copy", _HOPPER)
wgmma_gemm = _unsupported("wgmma_gemm", _HOPPER)


def wait_wgmma(count=0):
    """`T.wait_wgmma(n)`: wait until at most n wgmma groups are in flight.  tilecraft's T.gemm
    completes before the next statement (its `wg_wait` is not applied), so this is already true."""
    from .builder import require_kernel
    require_kernel("T.wait_wgmma")


alloc_tmem = _unsupported("alloc_tmem", "Blackwell tensor memory (sm_100)")

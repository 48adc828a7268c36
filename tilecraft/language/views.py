"""`T.view(buffer, shape=..., dtype=...)`: the bytes of a shared tile or a global tensor seen as a
buffer of another shape and, possibly, another element type (TileLang's reinterpreting view; a
kernel reuses a bf16 shared tile it is done with as a float32 staging tile, say).

The view starts at the first byte of its base and must fit inside it (an error at the user's line
otherwise).  It emits a `View` statement (ir/stmt.py) naming the underlying allocation: a view of a
view names the first one's base.  What holds downstream:
  - global views print as a pointer cast of the parameter (as `T.Tensor(shape, dtype, X.data)`);
  - shared views get their base's shared-memory offset (transform/plan_shared_memory.py), so the
    barrier pass, which compares byte ranges, orders accesses through the view against accesses
    through the base; the printers drop `__restrict__` on a viewed base, since two names then
    reach the same bytes;
  - bytes are the base's bytes only when both sides index row-major: a base that a gemm gives a
    swizzled layout can be reused through a view as scratch, but what a swizzled base holds is not
    readable element-for-element through a view.
A register fragment can be reshaped (`T.reshape(frag, shape)`, or `T.view` with its element type):
the view holds the same elements in row-major order, `view[idx]` is `frag[unravel(ravel(idx))]`, as
TileLang's reshape of a fragment.  On the CPU target it is the same array; on CUDA it names the same
per-thread registers with the base's layout reshaped (ir/layout/reshape.py, transform/infer_layouts.py).
A fragment's registers cannot be reinterpreted as another element type; local buffers cannot be viewed.
"""
from __future__ import annotations

from ..errors import TilecraftError
from ..ir import Buffer, View, collect
from ..ir import dtype as dt
from .builder import error, require_kernel


def _root(b, buffer: Buffer) -> Buffer:
    """The allocation `buffer` views (itself when it is not a view)."""
    for blk in b.blocks:
        for s in blk:
            for v in collect(s, lambda n: isinstance(n, View)):
                if v.buffer is buffer:
                    return v.base
    return buffer


def view(buffer, shape=None, dtype=None):
    """A buffer over the first bytes of `buffer` with `shape` and `dtype` (each defaulting to the
    base's)."""
    b = require_kernel("T.view")
    if not isinstance(buffer, Buffer):
        raise error(f"T.view: the first argument must be a shared tile, a register fragment or a global tensor, "
                    f"got {buffer!r}")
    if buffer.scope not in ("shared", "global", "fragment"):
        raise error(f"T.view({buffer.name}): {buffer.name} is a {buffer.scope} buffer; shared tiles, register fragments "
                    f"and global tensors can be viewed", hint="copy it into a shared tile or a fragment and view that")
    try:
        d = dt.dtype(dtype) if dtype is not None else buffer.dtype
    except (TilecraftError, ValueError) as e:
        raise error(f"T.view: {getattr(e, 'message', e)}") from None
    base_shape = tuple(buffer.shape)
    if shape is None:  # TileLang's default: the base's shape (with the new element type)
        shape = base_shape
    if isinstance(shape, int) or not hasattr(shape, "__iter__"):
        shape = (shape,)
    shape = tuple(shape)
    if any(not isinstance(s, int) or isinstance(s, bool) or s <= 0 for s in shape):
        if buffer.scope == "shared" or d != buffer.dtype:
            raise error(f"T.view({buffer.name}, shape={shape}): the view's shape must be positive Python ints")
    n = 1
    for s in shape:
        n = n * s
    if buffer.scope == "fragment" and (d != buffer.dtype or n != buffer.numel):
        raise error(f"T.view({buffer.name}, shape={shape}, dtype={d}): a register fragment can only be reshaped: "
                    f"the same element type ({buffer.dtype}) and number of elements ({buffer.numel}), as "
                    f"{tuple(buffer.shape)}", hint="a fragment's registers are per thread; view a shared tile to "
                    "reinterpret bytes")
    if isinstance(n, int) and all(isinstance(s, int) for s in base_shape):
        need, have = n * d.bits, buffer.numel * buffer.dtype.bits
        if need > have:
            raise error(f"T.view({buffer.name}, shape={shape}, dtype={d}): the view needs {need // 8} bytes but "
                        f"{buffer.name} {base_shape} {buffer.dtype} has {have // 8}",
                        hint="a view reinterprets the bytes of its base and must fit inside them")
    base = _root(b, buffer)
    view_buf = Buffer(b.fresh_name(b.pending_name or f"{buffer.name}_view"), shape, d, buffer.scope, span=b.span)
    b.emit(View(view_buf, base, span=b.span))
    return view_buf


def make_tensor(ptr, shape, dtype="float32"):
    """`T.make_tensor(ptrs[i], shape, dtype)`: the row-major tensor of `shape` and `dtype` at the address
    `ptr` holds, e.g. one entry of a `T.Tensor([n], T.ptr)` table of `tensor.data_ptr()` values (a
    grouped GEMM over separate tensors).  The address must be a tensor on the kernel's device, large
    enough for `shape`, and must not overlap the kernel's tensor parameters (they are `__restrict__`)."""
    from ..ir import Expr, as_expr
    b = require_kernel("T.make_tensor")
    p = as_expr(ptr) if isinstance(ptr, (int, Expr)) else None
    if p is None or not p.dtype.is_int or p.dtype.bits != 64:
        raise error(f"T.make_tensor: the address is a 64-bit integer (an element of a T.Tensor(..., T.ptr) "
                    f"table), got {ptr!r}")
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    if not shape or any(isinstance(s, bool) or not isinstance(s, int) or s <= 0 for s in shape):
        raise error(f"T.make_tensor: the shape must be positive compile-time ints, got {shape!r}")
    try:
        d = dt.dtype(dtype)
    except TilecraftError as e:
        raise error(f"T.make_tensor: {e.message}") from None
    buf = Buffer(b.fresh_name(getattr(b, "pending_name", None) or "tensor"), shape, d, "global", span=b.span)
    b.emit(View(buf, p, span=b.span))
    return buf

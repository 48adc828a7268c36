"""Schedule and layout annotations: `T.use_swizzle`, `T.annotate_layout`, `T.make_swizzled_layout`,
and the out-of-bounds values `T.annotate_safe_value` / `T.annotate_padding`.

The schedule and layout ones never change what a program computes, only how the CUDA target
arranges blocks and shared memory; the CPU target accepts and ignores them.  The out-of-bounds
values do change results: what a read past a tensor's edge gives (ir/oob.py).
"""
from __future__ import annotations

from ..ir import Annotate, AnnotationKey, Buffer, same_seq
from ..ir.oob import PADDING, SAFE_VALUE
from ..ir.stmt import SwizzledLayout  # noqa: F401  (T.make_swizzled_layout's value; tilelang.layout)
from .builder import error, require_kernel, warn_once


def make_swizzled_layout(buffer, *args, **kwargs):
    if not isinstance(buffer, Buffer):
        raise error(f"T.make_swizzled_layout expects a shared buffer, got {buffer!r}")
    return SwizzledLayout(buffer)


def use_swizzle(panel_size: int = 10, order: str = "row", enable: bool = True):
    b = require_kernel("T.use_swizzle")
    if not isinstance(panel_size, int) or panel_size <= 0:
        raise error(f"T.use_swizzle: panel_size must be a positive int, got {panel_size!r}")
    if order not in ("row", "col"):
        raise error(f"T.use_swizzle: order must be 'row' or 'col', got {order!r}")
    if order != "row":
        warn_once(("T.use_swizzle", "order"),
                  f"T.use_swizzle(order={order!r}) is ignored: tilecraft rasterizes blocks in row panels "
                  f"only; results do not change")
    if enable:
        b.emit(Annotate(AnnotationKey.USE_SWIZZLE, (panel_size, order), span=b.span))


def annotate_layout(layout_map: dict):
    b = require_kernel("T.annotate_layout")
    if not isinstance(layout_map, dict):
        raise error("T.annotate_layout expects a dict {buffer: layout}")
    from .layout import Layout  # language/layout.py imports this module
    for buf, lay in layout_map.items():
        if not isinstance(buf, Buffer):
            raise error(f"T.annotate_layout: keys must be buffers, got {buf!r}")
        if buf.scope != "shared" and isinstance(lay, SwizzledLayout):
            raise error(f"T.annotate_layout: {buf.name} is a {buf.scope} buffer; a swizzled layout "
                        f"applies to shared memory only")
        if isinstance(lay, Layout):
            _check_layout(buf, lay)
        elif not isinstance(lay, SwizzledLayout):
            raise error(f"T.annotate_layout: the layout of {buf.name} must be T.Layout, T.Fragment or "
                        f"T.make_swizzled_layout(...), got {type(lay).__name__}")
    b.emit(Annotate(AnnotationKey.LAYOUT, dict(layout_map), span=b.span))


def _check_layout(buf, lay) -> None:
    """A `Layout`/`Fragment` must cover the buffer; tilecraft keeps its own placement (see
    language/layout.py) and says so once per kind of buffer."""
    from .layout import Fragment
    if not same_seq(lay.shape, buf.shape):
        raise error(f"T.annotate_layout: the layout of {buf.name} is over shape {tuple(lay.shape)}, but "
                    f"{buf.name} has shape {tuple(buf.shape)}")
    if isinstance(lay, Fragment) and buf.scope not in ("fragment", "local"):
        raise error(f"T.annotate_layout: a Fragment layout applies to register tiles; {buf.name} is a "
                    f"{buf.scope} buffer")
    _check_one_to_one(buf, lay)
    why = {"global": "global tensors stay in their logical row-major order (kernels that share the tensor "
                     "see the same elements; torch reading it sees the logical order)",
           "shared": "tilecraft picks the shared-memory placement (swizzled for its gemms)",
           }.get(buf.scope, "tilecraft's layout inference places register tiles")
    warn_once(("T.annotate_layout", buf.scope, type(lay).__name__),
              f"T.annotate_layout: the {type(lay).__name__} given for the {buf.scope} buffer {buf.name} is "
              f"not applied: {why}; results do not change")


INJECTIVE_CHECK_LIMIT = 1 << 16   # elements: a layout over a larger tile is not enumerated


def _check_one_to_one(buf, lay) -> None:
    """Two elements of `buf` that a layout sends to the same place (the same physical slot; for a
    Fragment without replicas, the same thread and register) would overwrite each other where the
    layout is applied (TileLang): refused, naming both.  Tiles up to INJECTIVE_CHECK_LIMIT elements,
    layouts whose functions give ints for int indices."""
    import itertools

    from .layout import Fragment
    n = 1
    for d in lay.shape:
        n *= d
    if n > INJECTIVE_CHECK_LIMIT or (isinstance(lay, Fragment) and lay.replicate != 1):
        return
    seen = {}
    try:
        for idx in itertools.product(*[range(d) for d in lay.shape]):
            key = tuple(int(x) for x in lay.map_forward_index(idx))
            if isinstance(lay, Fragment):
                key = (lay.map_forward_thread(idx),) + key
            other = seen.setdefault(key, idx)
            if other != idx:
                where = (f"thread {key[0]}, register {list(key[1:])}" if isinstance(lay, Fragment)
                         else f"{list(key)}")
                raise error(f"T.annotate_layout: the layout of {buf.name} {tuple(buf.shape)} sends both "
                            f"{buf.name}{list(other)} and {buf.name}{list(idx)} to {where}: a layout must give every "
                            f"element its own place (it is not one-to-one)",
                            hint="check the layout function's strides and modulos over the whole tile")
    except (TypeError, ValueError):   # a function of symbolic values: not enumerable here
        return


def annotate_l2_hit_ratio(buffer, ratio):
    require_kernel("T.annotate_l2_hit_ratio")


def _value_map(what, mapping, scopes, hint):
    """[(buffer, value cast to its dtype)] of a {buffer: value} annotation."""
    from ..ir import Expr, as_expr, cast
    if not isinstance(mapping, dict):
        raise error(f"{what} expects a dict {{buffer: value}}, got {type(mapping).__name__}")
    out = []
    for buf, value in mapping.items():
        if not isinstance(buf, Buffer):
            raise error(f"{what}: keys must be buffers, got {buf!r}")
        if buf.scope not in scopes:
            raise error(f"{what}: {buf.name} is a {buf.scope} buffer; the keys are {' or '.join(scopes)} "
                        f"buffers", hint=hint)
        if getattr(value, "scope", None) == "var":
            value = as_expr(value)
        if not isinstance(value, (int, float, Expr)) or isinstance(value, Expr) and value.dtype.is_bool \
                and not buf.dtype.is_bool:
            raise error(f"{what}: the value for {buf.name} must be a number or a kernel value, got {value!r}")
        out.append((buf, cast(as_expr(value, buf.dtype), buf.dtype)))
    return out


def annotate_safe_value(mapping):
    """`T.annotate_safe_value({A: v})`: a read past the edge of the global tensor A gives v, not 0
    (ir/oob.py)."""
    b = require_kernel("T.annotate_safe_value")
    for buf, value in _value_map("T.annotate_safe_value", mapping, ("global",),
                                 "the value of a shared tile's elements filled from outside its source is "
                                 "T.annotate_padding({tile: value})"):
        b.emit(Annotate(SAFE_VALUE, (buf, value), span=b.span))


def annotate_padding(mapping):
    """`T.annotate_padding({S: v})`: an element of the tile S filled from outside its source tensor
    gets v, not 0 (ir/oob.py)."""
    b = require_kernel("T.annotate_padding")
    for buf, value in _value_map("T.annotate_padding", mapping, ("shared", "fragment", "local"),
                                 "the value read past a global tensor's edge is T.annotate_safe_value({A: value})"):
        b.emit(Annotate(PADDING, (buf, value), span=b.span))


def no_set_max_nreg():
    """TileLang's other spelling of `T.disable_warp_group_reg_alloc()` (language/hopper.py)."""
    from .hopper import disable_warp_group_reg_alloc
    disable_warp_group_reg_alloc()

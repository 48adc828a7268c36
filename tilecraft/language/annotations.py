"""Schedule and layout annotations: `T.use_swizzle`, `T.annotate_layout`, `T.make_swizzled_layout`.

They never change what a program computes, only how the CUDA target arranges blocks and shared
memory; the CPU target accepts and ignores them.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Annotate, Buffer, same_seq
from .builder import error, require_kernel, warn_once


@dataclass(frozen=True)
class SwizzledLayout:
    """Request: lay `buffer` out in shared memory with the bank-conflict-free XOR swizzle."""
    buffer: Buffer


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
        b.emit(Annotate("use_swizzle", (panel_size, order), span=b.span))


def annotate_layout(layout_map: dict):
    b = require_kernel("T.annotate_layout")
    if not isinstance(layout_map, dict):
        raise error("T.annotate_layout expects a dict {buffer: layout}")
    from ..layout.layout import Layout  # layout/ imports this module
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
    b.emit(Annotate("layout", dict(layout_map), span=b.span))


def _check_layout(buf, lay) -> None:
    """A `Layout`/`Fragment` must cover the buffer; tilecraft keeps its own placement (see
    layout/layout.py) and says so once per kind of buffer."""
    from ..layout.layout import Fragment
    if not same_seq(lay.shape, buf.shape):
        raise error(f"T.annotate_layout: the layout of {buf.name} is over shape {tuple(lay.shape)}, but "
                    f"{buf.name} has shape {tuple(buf.shape)}")
    if isinstance(lay, Fragment) and buf.scope not in ("fragment", "local"):
        raise error(f"T.annotate_layout: a Fragment layout applies to register tiles; {buf.name} is a "
                    f"{buf.scope} buffer")
    why = {"global": "global tensors stay in their logical row-major order (kernels that share the tensor "
                     "see the same elements; torch reading it sees the logical order)",
           "shared": "tilecraft picks the shared-memory placement (swizzled for its gemms)",
           }.get(buf.scope, "tilecraft's layout inference places register tiles")
    warn_once(("T.annotate_layout", buf.scope, type(lay).__name__),
              f"T.annotate_layout: the {type(lay).__name__} given for the {buf.scope} buffer {buf.name} is "
              f"not applied: {why}; results do not change")


def annotate_l2_hit_ratio(buffer, ratio):
    require_kernel("T.annotate_l2_hit_ratio")


def annotate_safe_value(mapping):
    require_kernel("T.annotate_safe_value")


def annotate_padding(mapping):
    require_kernel("T.annotate_padding")


def no_set_max_nreg():
    """TileLang's other spelling of `T.disable_warp_group_reg_alloc()` (language/hopper.py)."""
    from .hopper import disable_warp_group_reg_alloc
    disable_warp_group_reg_alloc()

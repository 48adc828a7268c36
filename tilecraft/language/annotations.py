"""Schedule and layout annotations: `T.use_swizzle`, `T.annotate_layout`, `T.make_swizzled_layout`.

They never change what a program computes, only how the CUDA target arranges blocks and shared
memory; the CPU target accepts and ignores them.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Annotate, Buffer
from .builder import error, require_kernel


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
    if enable:
        b.emit(Annotate("use_swizzle", (panel_size, order), span=b.span))


def annotate_layout(layout_map: dict):
    b = require_kernel("T.annotate_layout")
    if not isinstance(layout_map, dict):
        raise error("T.annotate_layout expects a dict {buffer: layout}")
    for buf, lay in layout_map.items():
        if not isinstance(buf, Buffer):
            raise error(f"T.annotate_layout: keys must be buffers, got {buf!r}")
        if buf.scope != "shared" and isinstance(lay, SwizzledLayout):
            raise error(f"T.annotate_layout: {buf.name} is a {buf.scope} buffer; a swizzled layout "
                        f"applies to shared memory only")
    b.emit(Annotate("layout", dict(layout_map), span=b.span))


def annotate_l2_hit_ratio(buffer, ratio):
    require_kernel("T.annotate_l2_hit_ratio")


def annotate_safe_value(mapping):
    require_kernel("T.annotate_safe_value")


def annotate_padding(mapping):
    require_kernel("T.annotate_padding")


def no_set_max_nreg():
    require_kernel("T.no_set_max_nreg")

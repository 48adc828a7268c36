"""Layout objects users can name (`tilecraft.layout` / `tilelang.layout`): `Layout`, `Fragment`,
`make_swizzled_layout` (the bank-conflict-free shared-memory swizzle)."""
from ..language.annotations import SwizzledLayout, make_swizzled_layout
from .layout import Fragment, Layout, make_cutlass_metadata_layout
from .swizzle import (make_full_bank_swizzled_layout, make_half_bank_swizzled_layout,
                      make_quarter_bank_swizzled_layout)

__all__ = ["SwizzledLayout", "make_swizzled_layout", "Layout", "Fragment", "make_cutlass_metadata_layout",
           "make_full_bank_swizzled_layout", "make_half_bank_swizzled_layout", "make_quarter_bank_swizzled_layout"]

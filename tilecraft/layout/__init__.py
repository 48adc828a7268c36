"""Layout objects users can name (`tilecraft.layout` / `tilelang.layout`): `Layout`, `Fragment`,
`make_swizzled_layout` (the bank-conflict-free shared-memory swizzle) and TileLang's named swizzles.
They live beside the language surface (language/layout.py, language/swizzle.py); this package keeps
TileLang's import paths (`tilelang.layout`, `.layout.layout`, `.layout.fragment`, `.layout.swizzle`).
The compiler's own fragment model is ir/layout/."""
from ..language.annotations import SwizzledLayout, make_swizzled_layout
from ..language.layout import Fragment, Layout, make_cutlass_metadata_layout
from ..language.swizzle import (make_full_bank_swizzled_layout, make_half_bank_swizzled_layout,
                                make_quarter_bank_swizzled_layout)

__all__ = ["SwizzledLayout", "make_swizzled_layout", "Layout", "Fragment", "make_cutlass_metadata_layout",
           "make_full_bank_swizzled_layout", "make_half_bank_swizzled_layout", "make_quarter_bank_swizzled_layout"]

"""`tilelang.layout.swizzle`: TileLang's module path for its named swizzles (language/swizzle.py)."""
from ..language.swizzle import (make_full_bank_swizzled_layout, make_half_bank_swizzled_layout,  # noqa: F401
                                make_quarter_bank_swizzled_layout)

"""Layout objects users can name (`tilecraft.layout.make_swizzled_layout`)."""
from ..language.annotations import SwizzledLayout, make_swizzled_layout

__all__ = ["SwizzledLayout", "make_swizzled_layout"]

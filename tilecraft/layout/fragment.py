"""`tilelang.layout.fragment`: TileLang's module path for the user-facing `Fragment` (language/layout.py;
the compiler's fragment model is ir/layout/fragment.py)."""
from ..language.layout import Fragment  # noqa: F401

"""`tilelang.layout.layout`: TileLang's module path for `Layout` / `Fragment` (language/layout.py)."""
from ..language.layout import Fragment, Layout, make_cutlass_metadata_layout  # noqa: F401

"""`tilelang.carver.roller`: the hint objects TileLang's template search returns (tilecraft's own,
small search: carver/template.py)."""
from .hint import Hint
from .rasterization import NoRasterization, Rasterization2DColumn, Rasterization2DRow

__all__ = ["Hint", "NoRasterization", "Rasterization2DRow", "Rasterization2DColumn"]

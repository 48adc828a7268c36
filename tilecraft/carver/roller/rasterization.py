"""Block rasterization plans a hint can carry (TileLang's names): none, or panels of `panel_width`
block rows / columns so neighbouring blocks share operand tiles in L2 (what `T.use_swizzle` does)."""
from __future__ import annotations


class NoRasterization:
    panel_width = 0

    def __repr__(self):
        return "NoRasterization"


class Rasterization2DRow:
    def __init__(self, panel_width: int = 8):
        self.panel_width = panel_width

    def __repr__(self):
        return f"Rasterization2DRow({self.panel_width})"


class Rasterization2DColumn(Rasterization2DRow):
    def __repr__(self):
        return f"Rasterization2DColumn({self.panel_width})"

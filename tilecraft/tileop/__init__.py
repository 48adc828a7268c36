"""TileLang's `tilelang.tileop`: the tile operators' shared names (`GemmWarpPolicy`).  tilecraft's
tile operators themselves are IR nodes (ir/tileop.py), not Python objects a program builds."""
from ..language.types import GemmWarpPolicy

__all__ = ["GemmWarpPolicy"]

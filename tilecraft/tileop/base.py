"""`tilelang.tileop.base`: `GemmWarpPolicy` (how a gemm's warps split the tile)."""
from ..language.types import GemmWarpPolicy

__all__ = ["GemmWarpPolicy"]

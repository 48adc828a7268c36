"""`tilelang.contrib`: the parts TileLang programs call (`nvcc.get_target_compute_version`)."""
from . import nvcc

__all__ = ["nvcc"]

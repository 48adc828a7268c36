"""Per-op CUDA lowerings, registered by op class in `CUDA_LOWERING` (see transform/lower_cuda.py)."""
from . import copy, gemm, misc, reduce  # noqa: F401  (importing registers the lowerings)
from .ctx import CUDA_LOWERING, Ctx

__all__ = ["CUDA_LOWERING", "Ctx"]

"""`tilelang.language.fp8`: the platform's 8-bit float dtypes by format name (see tilecraft.utils)."""
from ..utils import determine_fp8_type, determine_torch_fp8_type

__all__ = ["determine_fp8_type", "determine_torch_fp8_type"]

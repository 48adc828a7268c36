"""TileLang-compatible spelling: `from tilelang.cache import clear_cache`."""
from .compiler.cache import cache_info, clear_cache

__all__ = ["cache_info", "clear_cache"]

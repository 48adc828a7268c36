"""`tilelang.engine`: the source post-processing hooks (`engine.callback`)."""
from . import callback

__all__ = ["callback"]

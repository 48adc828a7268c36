"""tilecraft: a tile-level GPU kernel language and compiler.

Programs written for TileLang's classic API run unchanged after
`import tilecraft as tilelang; import tilecraft.language as T`.
"""
__version__ = "0.1.0"

from . import language
from .errors import TilecraftError, CompileError

"""Device printf (device/include/tilecraft/print.h)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import MSG, VALUE, Intrinsic, Operand


@dataclass(frozen=True)
class Print(Intrinsic):
    """`T.print(value, msg)`: one line with the block and thread indices."""
    entry = "tc::print"
    family = "debug"
    operands = (Operand("msg", MSG), Operand("value", VALUE, optional=True))


@dataclass(frozen=True)
class PrintElem(Intrinsic):
    """One element of a tile of `shape` with its coordinates (the trailing operands); on CUDA the
    header's `print(msg, buffer, index, value)` overload with the row-major index."""
    entry = "tc::print"
    family = "debug"
    operands = (Operand("msg", MSG), Operand("value", VALUE))
    shape: tuple

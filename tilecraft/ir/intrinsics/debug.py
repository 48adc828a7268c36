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
    """One element of a fragment with its tile coordinates (the trailing operands)."""
    entry = "tc::print_elem"
    family = "debug"
    operands = (Operand("msg", MSG), Operand("value", VALUE))

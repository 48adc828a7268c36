"""Device printf and assertions (device/include/tilecraft/print.h; the CPU target: tilecraft_cpu.h)."""
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


@dataclass(frozen=True)
class DeviceAssert(Intrinsic):
    """`T.device_assert(cond, msg)` / `assert cond, msg` on a kernel value: a false `cond` stops the
    kernel with `where` (the message with the program's file and line).  CUDA: printf + trap; CPU:
    the runtime raises a TilecraftError with it."""
    entry = "tc::device_assert"
    family = "debug"
    operands = (Operand("cond", VALUE),)
    where: str

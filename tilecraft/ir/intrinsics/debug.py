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


IKET_KINDS = {"mark": 0, "range_begin": 1, "range_end": 2}   # the kind codes the CPU log records


@dataclass(frozen=True)
class IketEvent(Intrinsic):
    """An in-kernel trace event of `tilelang.tools.cuda.iket` (language/iket.py): `kind` is "mark",
    "range_begin" or "range_end" of the session's event `event_id` (named `name`); `trace_dir` is the
    session's output directory, where the runtime writes the trace (runtime/iket.py).  The optional
    operand is the mark's runtime payload, of `payload_dtype`.  CPU target: a timestamped record in the
    kernel library's log (device/include/tilecraft_cpu_iket.h)."""
    entry = "tc::iket_event"
    family = "debug"
    operands = (Operand("payload", VALUE, optional=True),)
    event_id: int
    name: str
    kind: str
    trace_dir: str
    payload_dtype: str = ""

    def check(self):
        from .base import require
        require(self.kind in IKET_KINDS, self, f"kind must be one of {sorted(IKET_KINDS)}")
        require(isinstance(self.event_id, int) and self.event_id >= 0, self, "event_id must be an int >= 0")

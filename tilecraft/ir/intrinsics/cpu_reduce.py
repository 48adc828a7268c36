"""The CPU target's row reduction: `tc::reduce_row<R>` (device/include/tilecraft_cpu.h).

`T.reduce_sum / abssum / max / min / absmax` of a float32-accumulated fragment, one output element
at a time: the `n` elements at `src[0], src[stride], ...` folded into `init` in the header's fixed
order (element i into lane i % 8, the lanes folded pairwise, `init` last), so that the loop
vectorizes while the result stays one defined value on every machine.  The header states the
order; transform/lower_tile_ops_cpu.py decides when a reduction takes this path.
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import PTR, READ, VALUE, Intrinsic, Operand, require

# reduce kind -> the header's combiner type
REDUCERS = {"sum": "tc::ReduceSum", "abssum": "tc::ReduceAbsSum", "max": "tc::ReduceMax",
            "min": "tc::ReduceMin", "absmax": "tc::ReduceAbsMax"}


@dataclass(frozen=True)
class CpuReduceRow(Intrinsic):
    entry = "tc::reduce_row"
    family = "cpu reduce"
    operands = (Operand("src", PTR, READ), Operand("init", VALUE))
    kind: str
    n: int
    stride: int

    def check(self):
        require(self.kind in REDUCERS, self, f"kind is one of {sorted(REDUCERS)}")
        require(self.n >= 1 and self.stride >= 1, self, "n and stride are positive")

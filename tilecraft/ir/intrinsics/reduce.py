"""Warp reductions by xor shuffles (device/include/tilecraft/reduce.h)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import VALUE, Intrinsic, Operand, require

COMBINERS = ("sum", "max", "min")


@dataclass(frozen=True)
class ShflXorReduce(Intrinsic):
    """Combine a value over the lanes that differ in the bits of `lane_masks` (butterflies)."""
    entry = "tc::shfl_xor_reduce"
    family = "reduce"
    operands = (Operand("value", VALUE),)
    op: str
    lane_masks: tuple

    def check(self):
        require(self.op in COMBINERS, self, f"the combiner is one of {COMBINERS}")
        require(len(self.lane_masks) > 0, self, "give at least one lane mask")
        require(all(0 < m < 32 for m in self.lane_masks), self, "lane masks must be in 1..31")

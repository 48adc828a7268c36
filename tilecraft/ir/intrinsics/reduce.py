"""Warp shuffles and reductions by xor shuffles (device/include/tilecraft/reduce.h).

All of them are thread-level: the lanes of a warp exchange registers, which has no meaning on the
CPU target's tile path (one thread runs each statement over a whole tile), so they declare
`thread_level`: the CPU target then emulates the block's threads (transform/cpu_threads.py)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import VALUE, Intrinsic, Operand, require

COMBINERS = ("sum", "max", "min", "bitand", "bitor", "bitxor")


@dataclass(frozen=True)
class ShflXorReduce(Intrinsic):
    """Combine a value over the lanes that differ in the bits of `lane_masks` (butterflies)."""
    entry = "tc::shfl_xor_reduce"
    family = "reduce"
    thread_level = True
    operands = (Operand("value", VALUE),)
    op: str
    lane_masks: tuple

    def check(self):
        require(self.op in COMBINERS, self, f"the combiner is one of {COMBINERS}")
        require(len(self.lane_masks) > 0, self, "give at least one lane mask")
        require(all(0 < m < 32 for m in self.lane_masks), self, "lane masks must be in 1..31")


SHUFFLES = ("xor", "down", "up", "idx")


@dataclass(frozen=True)
class Shfl(Intrinsic):
    """One shuffle of `value` among groups of `width` lanes, full mask (every lane calls it): the value
    of lane `lane ^ lane_mask` (xor, `T.shfl_xor`), of `lane + delta` (down) or `lane - delta` (up),
    a lane's own value where that leaves the group, or of lane `src_lane` (idx, `T.shfl_sync`).
    The header's entry is `tc::shfl_<kind>`."""
    entry = "tc::shfl"
    family = "reduce"
    thread_level = True
    operands = (Operand("value", VALUE), Operand("lane", VALUE), Operand("width", VALUE, optional=True))
    kind: str

    def check(self):
        require(self.kind in SHUFFLES, self, f"the shuffle is one of {SHUFFLES}")


@dataclass(frozen=True)
class SyncWarp(Intrinsic):
    """`__syncwarp()`: a barrier of this warp's lanes (orders their shared-memory accesses; header: memory.h)."""
    entry = "tc::sync_warp"
    family = "reduce"
    thread_level = True


VOTES = ("any", "all", "ballot")


@dataclass(frozen=True)
class WarpVote(Intrinsic):
    """A vote of the warp's 32 lanes on a predicate, full mask (every lane calls it): nonzero when any
    lane's predicate holds (`T.any_sync`), when all do (`T.all_sync`), or the 32-bit mask of the lanes
    where it holds (`T.ballot`).  The header's entry is `tc::vote_<kind>`."""
    entry = "tc::vote"
    family = "reduce"
    thread_level = True
    operands = (Operand("predicate", VALUE),)
    kind: str

    def check(self):
        require(self.kind in VOTES, self, f"the vote is one of {VOTES}")


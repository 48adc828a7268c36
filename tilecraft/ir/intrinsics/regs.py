"""setmaxnreg (sm_90a, header: tma.h): a warpgroup's register budget moves between the roles of a
warp-specialized block.  Executed convergently by every thread of a warpgroup, as the first
statement of its role."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Effects, Intrinsic, require


def _check_regs(r):
    require(r.regs % 8 == 0 and 24 <= r.regs <= 256, r, "N in [24, 256], a multiple of 8")


@dataclass(frozen=True)
class WarpgroupRegAlloc(Intrinsic):
    """Raise this warpgroup's per-thread register budget to `regs` (the consumers)."""
    entry = "tc::warpgroup_reg_alloc"
    family = "setmaxnreg"
    effects = Effects(note="setmaxnreg.inc")
    regs: int

    def check(self):
        _check_regs(self)


@dataclass(frozen=True)
class WarpgroupRegDealloc(Intrinsic):
    """Lower this warpgroup's per-thread register budget to `regs` (the producer)."""
    entry = "tc::warpgroup_reg_dealloc"
    family = "setmaxnreg"
    effects = Effects(note="setmaxnreg.dec")
    regs: int

    def check(self):
        _check_regs(self)

"""mbarriers and the software-pipeline protocols built on them (device/include/tilecraft/pipeline.h,
tma.h): per-stage full/empty rings for cp.async (`pipe_*`), the block-barrier hook of a pipelined
mma.sync gemm, and plain mbarrier init / parity wait / invalidate for TMA.

Barrier operands are synchronisation objects, not data: sync insertion does not count them as
shared-memory reads or writes; each protocol places the block barriers their init and
invalidation need itself (transform/pipeline_copies.py)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import BARRIER, CP_ASYNC, CP_ASYNC_GROUPS, MBARRIER_PHASE, VALUE, Effects, Intrinsic, Operand, require


def _check_stages(p):
    require(p.stages >= 1, p, "S (stages) must be >= 1")


_BAR_T = (Operand("bar", BARRIER), Operand("t", VALUE))


@dataclass(frozen=True)
class PipelineBarrier(Intrinsic):
    """gemm_ss hook (an object): wait until at most `pending` cp.async groups are in flight, then
    a block barrier, before the gemm's last k16 step."""
    entry = "tc::PipelineBarrier"
    family = "pipeline"
    effects = Effects(proxy=CP_ASYNC, waits=CP_ASYNC_GROUPS, block_barrier=True)
    pending: int

    def check(self):
        require(self.pending >= 0, self, "N must be >= 0")


@dataclass(frozen=True)
class PipeInit(Intrinsic):
    """Thread 0 initialises full[0..S) and empty[0..S), `count` arrivals per phase."""
    entry = "tc::pipe_init"
    family = "pipeline"
    operands = (Operand("bar", BARRIER), Operand("count", VALUE))
    stages: int

    def check(self):
        _check_stages(self)


@dataclass(frozen=True)
class PipeAcquire(Intrinsic):
    """Before issuing tile t's copies: wait on empty[t % S] until tile t - S has been read."""
    entry = "tc::pipe_acquire"
    family = "pipeline"
    operands = _BAR_T
    effects = Effects(waits=MBARRIER_PHASE, barrier="bar", note="empty[t % S]")
    stages: int

    def check(self):
        _check_stages(self)


@dataclass(frozen=True)
class PipeCommit(Intrinsic):
    """After issuing tile t's copies: full[t % S] gets this thread's arrival when they land."""
    entry = "tc::pipe_commit"
    family = "pipeline"
    operands = _BAR_T
    effects = Effects(proxy=CP_ASYNC, arrives=True, barrier="bar",
                      note="full[t % S], when this thread's cp.async copies land")
    stages: int

    def check(self):
        _check_stages(self)


@dataclass(frozen=True)
class PipeWait(Intrinsic):
    """Before reading tile t: wait on full[t % S] until its copies have landed."""
    entry = "tc::pipe_wait"
    family = "pipeline"
    operands = _BAR_T
    effects = Effects(waits=MBARRIER_PHASE, barrier="bar", note="full[t % S]")
    stages: int

    def check(self):
        _check_stages(self)


@dataclass(frozen=True)
class PipeRelease(Intrinsic):
    """gemm_ss hook (an object): this thread has read tile t, arrive on empty[t % S]."""
    entry = "tc::PipeRelease"
    family = "pipeline"
    operands = _BAR_T
    effects = Effects(arrives=True, barrier="bar", note="empty[t % S] (release: the tile's reads come before it)")
    stages: int

    def check(self):
        _check_stages(self)


@dataclass(frozen=True)
class PipeInval(Intrinsic):
    """Thread 0 invalidates the 2*S barriers so their bytes may be reused."""
    entry = "tc::pipe_inval"
    family = "pipeline"
    operands = (Operand("bar", BARRIER),)
    stages: int

    def check(self):
        _check_stages(self)


@dataclass(frozen=True)
class MbarInit(Intrinsic):
    """Initialise one mbarrier expecting `count` arrivals per phase (one thread)."""
    entry = "tc::mbar_init"
    family = "mbarrier"
    operands = (Operand("bar", BARRIER), Operand("count", VALUE))


@dataclass(frozen=True)
class MbarInval(Intrinsic):
    """Invalidate one mbarrier (one thread), so its bytes may be reused."""
    entry = "tc::mbar_inval"
    family = "mbarrier"
    operands = (Operand("bar", BARRIER),)


@dataclass(frozen=True)
class MbarWaitParity(Intrinsic):
    """Wait until the mbarrier's phase with the given parity has completed."""
    entry = "tc::mbar_wait_parity"
    family = "mbarrier"
    operands = (Operand("bar", BARRIER), Operand("parity", VALUE))
    effects = Effects(waits=MBARRIER_PHASE, barrier="bar")


@dataclass(frozen=True)
class MbarArriveWarp(Intrinsic):
    """One arrival per warp on the mbarrier (lane 0's), after the warp's own reads of the stage it
    guards (a warp-specialized consumer releasing a stage to the producer; header: tma.h)."""
    entry = "tc::mbar_arrive_warp"
    family = "mbarrier"
    operands = (Operand("bar", BARRIER),)
    effects = Effects(arrives=True, barrier="bar", note="one arrival per warp (release)")

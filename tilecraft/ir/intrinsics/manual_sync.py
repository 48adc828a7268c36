"""mbarriers a program drives itself (T.alloc_barrier / T.barrier_arrive / T.barrier_wait; IR in
ir/hopper.py): the per-thread arrival on CUDA (header: tma.h), and the CPU target's simulation of
an mbarrier (header: tilecraft_cpu.h), where one thread runs the whole block in program order.

On the CPU an arrival stands for every thread that runs the statement (`count` of them) and a wait
that the program order cannot satisfy (it would wait for a later statement) is reported with the
user's line (`where`) instead of hanging: the CPU target is the reference, and such a program has
no sequential meaning."""
from __future__ import annotations

from dataclasses import dataclass

from .base import BARRIER, MBARRIER_PHASE, VALUE, Effects, Intrinsic, Operand, require


@dataclass(frozen=True)
class MbarArrive(Intrinsic):
    """This thread's arrival on the mbarrier (release: its earlier writes are visible to threads
    that see the phase complete)."""
    entry = "tc::mbar_arrive"
    family = "mbarrier"
    operands = (Operand("bar", BARRIER),)
    effects = Effects(arrives=True, barrier="bar", note="one arrival per thread (release)")


@dataclass(frozen=True)
class MbarArriveCluster(Intrinsic):
    """This thread's arrival on the mbarrier at the same shared-memory offset in block `cta` of its
    cluster (a remote arrival; PTX mapa.shared::cluster + mbarrier.arrive.release.cluster: its
    earlier writes are visible to the threads of block `cta` that see the phase complete)."""
    entry = "tc::mbar_arrive_cluster"
    family = "mbarrier"
    operands = (Operand("bar", BARRIER), Operand("cta", VALUE))
    effects = Effects(arrives=True, barrier="bar", note="one arrival per thread on block `cta`'s mbarrier "
                                                        "(release, cluster scope)")


@dataclass(frozen=True)
class MbarWaitParityCluster(Intrinsic):
    """MbarWaitParity with acquire at cluster scope: in a kernel whose blocks arrive on each other's
    mbarriers, the writes another block released with its arrival are visible after the wait."""
    entry = "tc::mbar_wait_parity_cluster"
    family = "mbarrier"
    operands = (Operand("bar", BARRIER), Operand("parity", VALUE))
    effects = Effects(waits=MBARRIER_PHASE, barrier="bar", note="acquire, cluster scope")


@dataclass(frozen=True)
class ClusterSync(Intrinsic):
    """Every thread of every block of the cluster waits here for all the others (PTX
    barrier.cluster.arrive.release + barrier.cluster.wait.acquire): after the mbarrier set-up, before
    any block arrives on another's mbarriers, and before a block exits while the others may still
    arrive on its own."""
    entry = "tc::cluster_sync"
    family = "mbarrier"
    effects = Effects(note="a barrier of the whole cluster (release / acquire, cluster scope)")


@dataclass(frozen=True)
class CpuMbarArrive(Intrinsic):
    """CPU target: `count` arrivals at once (the threads that run the statement)."""
    entry = "tc::cpu_mbar_arrive"
    family = "mbarrier"
    operands = (Operand("bar", BARRIER), Operand("count", VALUE))
    effects = Effects(arrives=True, barrier="bar", note="the arrivals of every thread running it")


@dataclass(frozen=True)
class CpuMbarWait(Intrinsic):
    """CPU target: check that the phase with the given parity has completed; when it has not, the
    program order cannot satisfy the wait: record `site` (1-based) as the kernel's failure."""
    entry = "tc::cpu_mbar_wait"
    family = "mbarrier"
    operands = (Operand("bar", BARRIER), Operand("parity", VALUE))
    effects = Effects(waits=MBARRIER_PHASE, barrier="bar")
    site: int
    where: str

    def check(self):
        require(self.site >= 1, self, "site numbers start at 1")

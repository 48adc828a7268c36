"""Fences (device/include/tilecraft/gemm_sm90.h)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Effects, Intrinsic, require


@dataclass(frozen=True)
class FenceProxyAsyncShared(Intrinsic):
    """Order this thread's generic-proxy (and completed cp.async) shared-memory writes before
    later async-proxy reads (wgmma, TMA store); a block barrier must follow for other threads."""
    entry = "tc::fence_proxy_async_shared"
    family = "fence"
    effects = Effects(fences="generic -> async proxy (shared memory)")


@dataclass(frozen=True)
class NamedBarrierSync(Intrinsic):
    """`T.sync_threads(barrier_id, arrive_count)`: the `threads` threads that reach it wait on
    hardware barrier `barrier_id` (bar.sync id, count; header: memory.h).  It orders only those
    threads, so insert_syncs does not count it as a block barrier."""
    entry = "tc::named_barrier_sync"
    family = "fence"
    effects = Effects(note="named barrier, the `threads` threads that reach it")
    barrier_id: int
    threads: int

    def check(self):
        require(0 <= self.barrier_id < 16, self, "barrier ids are 0..15")
        require(self.threads > 0 and self.threads % 32 == 0, self, "the threads are whole warps (THREADS % 32 == 0)")


@dataclass(frozen=True)
class NamedBarrierArrive(Intrinsic):
    """`T.named_barrier_arrive(barrier_id, threads)`: arrive on hardware barrier `barrier_id` without
    waiting (bar.arrive id, count; header: memory.h); the barrier completes when `threads` threads
    have arrived or synced on it.  Orders nothing for this thread: not a block barrier."""
    entry = "tc::named_barrier_arrive"
    family = "fence"
    effects = Effects(note="named barrier arrival, `threads` threads complete it")
    barrier_id: int
    threads: int

    def check(self):
        require(0 <= self.barrier_id < 16, self, "barrier ids are 0..15")
        require(self.threads > 0 and self.threads % 32 == 0, self, "the threads are whole warps (THREADS % 32 == 0)")


@dataclass(frozen=True)
class WgTurnInit(Intrinsic):
    """Give consumer warpgroup 0 of `wg` the first turn (named barriers 2 .. 1+wg; header: tma.h)."""
    entry = "tc::wg_turn_init"
    family = "fence"
    effects = Effects(note="named barrier 2, arrival of the last consumer warpgroup")
    wg: int

    def check(self):
        require(2 <= self.wg <= 4, self, "2 to 4 consumer warpgroups")


@dataclass(frozen=True)
class WgTurnWait(Intrinsic):
    """This consumer warpgroup waits for its turn to issue wgmmas (named barrier 2 + its index).
    Orders no memory: insert_syncs does not count it as a barrier."""
    entry = "tc::wg_turn_wait"
    family = "fence"
    effects = Effects(note="named barrier 2 + this warpgroup's index, 256 threads")
    wg: int

    def check(self):
        require(2 <= self.wg <= 4, self, "2 to 4 consumer warpgroups")


@dataclass(frozen=True)
class WgTurnPass(Intrinsic):
    """Pass the turn to the next consumer warpgroup (arrive on its named barrier)."""
    entry = "tc::wg_turn_pass"
    family = "fence"
    effects = Effects(note="arrival on named barrier 2 + the next warpgroup's index")
    wg: int

    def check(self):
        require(2 <= self.wg <= 4, self, "2 to 4 consumer warpgroups")


@dataclass(frozen=True)
class ConsumerSync(Intrinsic):
    """Barrier among the `threads` consumer threads of a warp-specialized block (named barrier 1;
    __syncthreads would wait for the producer warpgroup, which never reaches it; header: tma.h)."""
    entry = "tc::consumer_sync"
    family = "fence"
    effects = Effects(block_barrier=True, note="named barrier 1, consumer threads only")
    threads: int

    def check(self):
        require(self.threads > 0 and self.threads % 32 == 0, self, "the consumers are whole warps (THREADS % 32 == 0)")

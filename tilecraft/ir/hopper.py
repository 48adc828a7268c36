"""IR of the manual Hopper constructs: warp-group branches (`T.ws`), mbarriers the program
allocates and drives itself (`T.alloc_barrier`, `T.barrier_arrive` / `T.barrier_wait`,
`T.mbarrier_arrive` / `T.mbarrier_wait_parity`) and register budgets (`T.set_max_nreg`).

These are statements of the tile IR like the tile ops: each target lowers them
(transform/lower_manual_sync_cpu.py for the CPU reference, transform/lower_manual_sync_cuda.py
for CUDA).  Their meaning, which every target keeps:

- `WarpGroupScope(groups, body)`: `body` is run by the threads whose warp group
  (flat thread index // 128) is in `groups`, and only by them.  Tile ops inside it are spread over
  those threads alone.
- A barrier buffer (`Buffer` of scope "shared", dtype uint64, one word per mbarrier) is set up once
  by `BarrierInit` with the arrivals each of its mbarriers expects per phase.
- `BarrierArrive(ref)`: every thread that runs it arrives once on the mbarrier `ref`; when the
  arrivals of the current phase reach the expected count the phase completes (and the next starts).
  The writes a thread made before its arrival are visible to threads that then see the phase
  complete (release / acquire).
- `BarrierArrive(ref, cta)`: the same arrival on the mbarrier `ref` of block `cta` of the thread's
  cluster (a remote arrival): the block's writes before it, to its own shared memory or global
  memory, are visible to the threads of block `cta` that see the phase complete.
- `BarrierWait(ref, parity)`: the thread waits until the phase with parity `parity` has completed,
  i.e. until the mbarrier's current phase parity differs from `parity` (PTX
  mbarrier.try_wait.parity): a fresh mbarrier (phase 0 running) lets a wait on parity 1 through
  at once and holds a wait on parity 0 until its first phase completes.
- `SetMaxNreg(regs, inc)`: this warp group's per-thread register budget (sm_90a setmaxnreg);
  no effect on results.
- `TmaCopy(copy, barrier)`: `T.tma_copy(src, dst, barrier=bar)`, a load from global into a shared tile
  whose bytes are counted as a transaction on `bar` (TileLang: one elected thread runs expect_tx and
  the TMA load; the program's own arrivals complete the phase).  Every target keeps: the tile holds
  `src` once the threads that ran the statement have passed it (each of them, not one elected
  thread), so their next arrival on `bar` publishes it to the threads that wait on `bar`.  The
  transaction's bytes add nothing to a phase: the phase completes on arrivals alone, and a program
  whose phase is completed by arrivals of threads that did not run the copy (the bytes would hold
  it on a GPU) is refused up front (check_tma_arrivals).
"""
from __future__ import annotations

from dataclasses import dataclass

from .buffer import Buffer
from .expr import Expr, Ref
from .stmt import Stmt
from .tileop import Copy, TileOp

WARP_GROUP = 128  # threads per warp group
REGISTER_FILE = 65536  # 32-bit registers per SM (sm_90): what setmaxnreg budgets share
SHARED_PER_SM = 228 * 1024  # bytes of shared memory per SM (sm_90), all resident blocks together
BLOCK_SHARED_RESERVE = 1024  # of which every resident block's launch takes this much for itself


@dataclass(frozen=True, eq=False)
class WarpGroupScope(Stmt):
    """`with T.ws(*groups):` -- `body` runs on the warp groups `groups` only.  With `lanes` = (lo,
    hi), a branch of whole warps that is not whole warp groups (`if tx < 32:` around tile work,
    transform/warp_groups/thread_range_branches.py): the body runs on threads [lo, hi) only, and `groups` are
    the warp groups those threads belong to."""
    groups: tuple
    body: Stmt
    lanes: tuple = ()

    def bounds(self, block_threads: int) -> tuple:
        """[first, end) flat thread indices of the threads that run the body."""
        if self.lanes:
            return self.lanes[0], min(self.lanes[1], block_threads)
        return WARP_GROUP * self.groups[0], min(WARP_GROUP * (self.groups[-1] + 1), block_threads)

    def threads_in(self, block_threads: int) -> int:
        """How many of a block's `block_threads` threads run the body."""
        if self.lanes:
            lo, hi = self.bounds(block_threads)
            return max(0, hi - lo)
        return sum(max(0, min(WARP_GROUP, block_threads - g * WARP_GROUP)) for g in self.groups)

    @property
    def key(self) -> tuple:
        """Which threads run the body, as a hashable value (equal for branches of the same threads)."""
        return (self.groups, self.lanes)


@dataclass(frozen=True, eq=False)
class BarrierInit(TileOp):
    """Set up the mbarriers of `buffer`: mbarrier i expects `counts[i]` arrivals per phase."""
    buffer: Buffer
    counts: tuple


@dataclass(frozen=True, eq=False)
class BarrierArrive(TileOp):
    """Each thread that runs this arrives once on the mbarrier `barrier` (a Ref of one word).  With
    `cta` (a remote arrival, `T.mbarrier_arrive(bar, cta_id)` in a `T.ClusterKernel`): on the mbarrier
    at the same shared-memory offset in block `cta` of this block's cluster (its rank,
    `T.block_rank_in_cluster`), release at cluster scope (PTX mapa + mbarrier.arrive.release.cluster)."""
    barrier: Ref
    cta: Expr | None = None


@dataclass(frozen=True, eq=False)
class BarrierWait(TileOp):
    """Wait until the phase of `barrier` with parity `parity` (0 or 1) has completed."""
    barrier: Ref
    parity: Expr


@dataclass(frozen=True, eq=False)
class SetMaxNreg(TileOp):
    """This warp group's per-thread register budget becomes `regs` (`inc`: raise, else lower)."""
    regs: int
    inc: bool



@dataclass(frozen=True, eq=False)
class TmaCopy(TileOp):
    """`T.tma_copy(src, dst, barrier=bar)`: `copy` (global -> shared), its bytes a transaction on
    `barrier` (a Ref of one mbarrier word).  The copy is a field, so generic passes (validation,
    region checks) see it as the Copy it is."""
    copy: Copy
    barrier: Ref

    def reads(self):
        return self.copy.reads()

    def writes(self):
        return self.copy.writes()

"""How a `T.Pipelined` loop runs: one frozen plan type per form, stored on the loop (`For.plan`).

`transform/plan_pipelines.py` decides every loop's plan once (every option and TileLang switch
resolved there, every "why not another form" recorded in the plan), and
`transform/pipeline_copies.py` rewrites each loop from its plan with the builder registered for the
plan's class (`transform/pipelining/<form>.py`).  A loop without a plan stays a serial loop with
synchronous copies.  The plan note a kernel reports (`kernel.get_plan()`) is the loop's line
followed by `plan.describe()`.

The forms (the builders' docstrings draw each loop):
- `CpAsync`: cp.async copies issued S-1 tiles ahead; the per-iteration wait + barrier either in
  the loop (`CpSync.BLOCK`), inside a lone mma.sync gemm before its last k16 step (`GEMM_HOOK`), or
  per-stage mbarriers (`MBARRIER`);
- `WgmmaAsync`: cp.async copies feeding one wgmma gemm that keeps one group in flight;
- `Tma`: thread 0 loads each tile by TMA boxes (`TmaLoad` per producer copy) on per-stage mbarriers,
  the body one async wgmma gemm (`wgmma=True`) or anything;
- `WarpSpecialized`: a producer warpgroup issues the `Tma` loads into full/empty rings, the
  consumers run the body (optionally the overlapped two-gemm loop, and as two blocks per SM);
- `Persistent`: the kernel's blocks walk its tiles (`TileWalk`), the TMA ring running across tiles.

New forms (cluster launches, a schedule given by the program) are a new plan class here, a decision
in plan_pipelines and a builder module registered for the class.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .expr import binary
from .functor import substitute


class CpSync(enum.Enum):
    """Where a cp.async loop waits for its tiles."""
    BLOCK = "block"            # wait + barrier at the top of every iteration
    GEMM_HOOK = "gemm_hook"    # inside the loop's lone mma.sync gemm (tc::PipelineBarrier)
    MBARRIER = "mbarrier"      # per-stage full/empty mbarriers (tc::pipe_*), tc.mbarrier_pipeline


_CP_NOTES = {
    CpSync.BLOCK: "cp.async copies issued a tile ahead, wait + barrier per iteration",
    CpSync.GEMM_HOOK: "cp.async copies issued a tile ahead, wait + barrier inside the mma.sync gemm",
    CpSync.MBARRIER: "cp.async copies on per-stage mbarriers",
}
TMA_WGMMA_NOTE = "TMA tile loads on per-stage mbarriers, one wgmma group kept in flight"
TMA_BODY_NOTE = "TMA tile loads issued a tile ahead on per-stage mbarriers, barrier per iteration"
_WS_HEAD = "warp-specialized: a producer warpgroup issues TMA tile loads into a ring of full/empty mbarriers, "
WS_WGMMA_NOTE = _WS_HEAD + "consumer warpgroups keep one wgmma group in flight"
WS_BODY_NOTE = _WS_HEAD + "consumer warps release each stage after the body"
WS_OVERLAP_NOTE = (_WS_HEAD + "consumer warpgroups run each iteration's first gemm and softmax while the "
                   "previous iteration's second gemm runs (wgmma in flight)")
TWO_BLOCK_NOTE = "; two blocks per SM"


@dataclass(frozen=True)
class CpAsync:
    stages: int
    sync: CpSync = CpSync.BLOCK
    refusals: tuple = ()     # why not another form (text appended to the note)

    def describe(self) -> str:
        return f"{self.stages} stages, {_CP_NOTES[self.sync]}{''.join(self.refusals)}"


@dataclass(frozen=True)
class WgmmaAsync:
    stages: int
    refusals: tuple = ()

    def describe(self) -> str:
        return f"{self.stages} stages, cp.async copies, one wgmma group kept in flight{''.join(self.refusals)}"


@dataclass(frozen=True)
class TmaLoad:
    """How one producer copy is loaded: the swizzle mode, the boxes
    (shared offset, row, column, box rows, box columns), the tensor dim the tile's rows run along and
    `split`: a row longer than one box dim is mapped as [cols / split][split] (ir/layout/tma.py::row_split;
    0: not split)."""
    swizzle: int
    boxes: tuple
    row_dim: int
    split: int = 0


@dataclass(frozen=True)
class Tma:
    stages: int
    loads: tuple             # a TmaLoad per producer copy, in program order
    wgmma: bool              # the body is one wgmma gemm kept in flight (else any body, a barrier per iteration)
    refusals: tuple = ()

    def describe(self) -> str:
        return f"{self.stages} stages, {TMA_WGMMA_NOTE if self.wgmma else TMA_BODY_NOTE}{''.join(self.refusals)}"


@dataclass(frozen=True)
class WarpSpecialized:
    """The `tma` loads issued by a producer warpgroup; `threads` consumer threads.  `blocks`: blocks
    per SM it launches for (2: the two-block split, its ring deepened from the program's `asked`
    stages); `budgets`: the (producer, consumer) setmaxnreg budgets of the roles ((0, 0): none),
    applied unless `set_max_nreg` is off (T.disable_warp_group_reg_alloc); `rings`: producer copy
    indices per full/empty ring, () for one ring of all; `overlap`: the consumer runs the
    overlapped two-gemm loop (pipelining/overlap.py), its warpgroups issuing in turns with `pingpong`."""
    tma: Tma
    threads: int
    blocks: int = 1
    asked: int = 0
    budgets: tuple = (0, 0)
    set_max_nreg: bool = True
    rings: tuple = ()
    overlap: bool = False
    pingpong: bool = False

    @property
    def stages(self) -> int:
        return self.tma.stages

    def describe(self) -> str:
        form = WS_OVERLAP_NOTE if self.overlap else WS_WGMMA_NOTE if self.tma.wgmma else WS_BODY_NOTE
        two = ""
        if self.blocks == 2:
            producer, consumer = self.budgets
            deeper = f", the ring deepened from the program's {self.asked} stages" if self.stages != self.asked else ""
            two = (f"{TWO_BLOCK_NOTE} (__launch_bounds__({self.threads + 128}, 2), setmaxnreg "
                   f"{producer}/{consumer}){deeper}, the consumer loop unrolled {self.stages}x")
        return f"{self.stages} stages, {form}{two}"


@dataclass(frozen=True, eq=False)
class TileWalk:
    """The walk of one persistent kernel: its loop variable `it`, block index `block`, `blocks`
    blocks over `tiles` tiles, the tile coordinates (block var -> expression of `it`, as pairs) and
    the pipelined loop's `n` k-tiles."""
    it: object
    block: object
    blocks: int
    tiles: int
    coords: tuple
    n: int

    def tile(self, it) -> object:
        return binary("+", self.block, binary("*", it, self.blocks))

    def count(self, ko) -> object:
        """The ring's running count at k-tile `ko` of this iteration's tile."""
        return binary("+", binary("*", self.it, self.n), ko)

    def has_tile(self, it) -> object:
        return binary("<", self.tile(it), self.tiles)

    def coords_at(self, it) -> dict:
        return {v: substitute(e, {self.it: it}) for v, e in self.coords}

    def note(self) -> str:
        return (f", persistent: {self.blocks} blocks walk the {self.tiles} tiles, the next tile's first "
                f"k-tiles loading during this tile's epilogue (tc.persistent_tiles)")


@dataclass(frozen=True)
class Persistent:
    tma: Tma
    walk: TileWalk

    @property
    def stages(self) -> int:
        return self.tma.stages

    def describe(self) -> str:
        return f"{self.stages} stages, {TMA_WGMMA_NOTE}{self.walk.note()}"


LOOP_PLANS = (CpAsync, WgmmaAsync, Tma, WarpSpecialized, Persistent)

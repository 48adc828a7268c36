"""Decide how every `T.Pipelined` loop runs (CUDA targets with cp.async), once, as data.

Before: pipelined loops carry `num_stages`; gemms carry their plans (infer_layouts) and shared tiles
their swizzles (plan_shared_layouts).  After: every pipelined loop that will be rewritten carries its
plan (`For.plan`, one class per form, ir/loop_plan.py) and the function's plan notes gain a line per
such loop (`plan.describe()`).  Every option and TileLang switch that bears on the form is resolved
here (tc.wgmma_async, tc.use_tma / tl.disable_tma_lower, tc.mbarrier_pipeline, tc.warp_specialize /
tl.disable_warp_specialized, tc.overlap_gemms, tc.overlap_pingpong, tc.persistent_tiles,
T.disable_warp_group_reg_alloc), and so is every "why not another form" the notes report;
pipeline_copies then rewrites each loop from its plan alone.

A loop is planned when it has S >= 2 stages and producer copies (whole shared tiles filled from
global memory at indices that depend on nothing computed inside the loop); any other loop stays a
serial loop with synchronous copies.  The choice, per loop:
- a kernel of one top-level pipelined TMA + wgmma loop over a static 2-D grid may walk its tiles
  (`Persistent`, pipelining/persistent.py says when "auto" takes it);
- one async wgmma gemm (`tc.wgmma_async`): `Tma` (wgmma) when every producer can load by TMA, else
  `WgmmaAsync`;
- one mma.sync gemm on shared tiles: `CpAsync` synchronised in the gemm (`GEMM_HOOK`, or `MBARRIER`);
- any other body: `Tma` when every producer can load by TMA, else `CpAsync` (`BLOCK`);
- a TMA loop at the kernel's top level may be split between a producer warpgroup and the consumers
  (`WarpSpecialized`, at most one per kernel; `_ws_pays` says when "auto" takes it), as two blocks
  per SM for one consumer warpgroup (`two_block_ring`), with the overlapped two-gemm consumer
  (`tc.overlap_gemms`) when the body has FlashAttention's shape.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir import (Alloc, Annotate, AnnotationKey, For, Gemm, Kernel, Load, Mutator, Ref, Region, Store, Var, collect,
                  seq, where)
from ..ir.expr import Const
from ..ir.func import PrimFunc
from ..ir.hopper import WARP_GROUP
from ..ir.loop_plan import CpAsync, CpSync, Persistent, TileWalk, Tma, TmaLoad, WarpSpecialized, WgmmaAsync
from ..ir.lowering import SWIZZLE_SM90, Mma80Plan, WgmmaPlan
from ..ir.layout.tma import row_split, tile_boxes, tma_copy_problem, tma_tensor_ok
from ..ir.oob import out_of_bounds
from ..options import TriState
from .pipelining.overlap import overlap_parts, ring_split
from .pipelining.parts import body_stmts, flat, producers, static_ge
from .pipelining.persistent import AUTO_MAX_K_TILES, AUTO_MIN_WAVES, tile_coords
from .pipelining.warp_specialized import register_budgets, shared_bytes_beside, split_placeable, two_block_ring
from .warp_groups import is_manual

MANUAL_NOTE = ("T.Pipelined: not pipelined by the compiler: the kernel synchronises its warp groups by hand "
               "(T.ws / T.alloc_barrier), so its loops run as written")
NOT_PLACEABLE = " (not warp-specialized: the loads need values the kernel computes before the loop)"


@dataclass(frozen=True)
class Switches:
    """The options that choose a loop's form, every veto resolved."""
    wgmma_async: bool
    tma: bool
    mbarrier: bool
    warp_specialize: TriState
    persistent: TriState
    overlap: bool
    pingpong: bool

    @classmethod
    def of(cls, opts) -> "Switches":
        return cls(opts.wgmma_async, opts.tma, opts.mbarrier_pipeline, opts.warp_specialization,
                   opts.persistent_tiles, opts.overlap_gemms, opts.overlap_pingpong)


class _Planner(Mutator):
    def __init__(self, switches: Switches, target, layouts: dict, smem_layouts: dict, params, symbols, body):
        super().__init__()
        self.sw = switches
        self.smem_limit = target.max_shared_memory   # bytes of shared memory one block may use
        self.no_tma = None if target.has("tma") else f"{target.arch} has no TMA (sm_90 and later)"
        self.num_sms = target.num_sms
        self.layouts, self.smem_layouts = layouts, smem_layouts
        self.params = {id(b) for b in params}   # TMA maps are built from the kernel's parameters only
        self.symbols = symbols                  # the program's size symbols (a persistent walk needs none)
        self.oob = out_of_bounds(body)          # T.annotate_safe_value / T.annotate_padding: TMA fills zeros only
        self.notes: list = []
        self.threads = 0
        self.kernel_smem = 0
        self.kernel_body = None
        self.walk = None           # (the walked loop, its TileWalk)
        self.ws_loops: set = set()
        self.ws_taken = False
        self.manual_regs = False   # T.disable_warp_group_reg_alloc()

    # ---- the kernel -----------------------------------------------------------------------------
    def visit_Kernel(self, k: Kernel):
        self.threads = k.num_threads
        self.kernel_smem = sum(a.buffer.nbytes for a in collect(k.body, lambda n: isinstance(n, Alloc))
                               if a.buffer.scope == "shared")
        self.kernel_body = k.body
        self.manual_regs = bool(collect(k.body, lambda n: isinstance(n, Annotate)
                                        and n.key == AnnotationKey.NO_SET_MAX_NREG))
        self.walk = self._plan_walk(k)
        one_d = all(t == 1 for t in k.threads[1:])
        self.ws_loops = {id(s) for s in flat(k.body) if isinstance(s, For) and s.kind == "pipelined"
                         and self.sw.warp_specialize and one_d and self.threads % WARP_GROUP == 0}
        self.ws_taken = False
        return Mutator.generic(self, k)

    def visit_Alloc(self, a):
        return a

    # ---- a loop ---------------------------------------------------------------------------------
    def visit_For(self, f: For):
        top_level = id(f) in self.ws_loops
        walked = self.walk is not None and f is self.walk[0]
        written = f
        f = Mutator.generic(self, f)
        stages = f.annotation("num_stages", 0) if f.kind == "pipelined" else 0
        if stages < 2:
            return f
        prods = producers(f)
        if not prods:
            return f
        plan = self._plan(written, f, prods, stages, top_level, walked)
        self.notes.append(f"{where(f.span)}: T.Pipelined, {plan.describe()}")
        return replace(f, plan=plan)

    def _plan(self, written, f, prods, stages, top_level, walked):
        if walked:
            return Persistent(Tma(stages, self._loads(prods), True), self.walk[1])
        asked, blocks = stages, 1
        if top_level and not self.ws_taken:
            depth = self._two_block_depth(written, f, prods, stages)
            if depth:
                stages, blocks = depth, 2
        rest = [s for s in body_stmts(f) if s not in prods]
        tiles = {c.dst.buffer for c in prods}
        rest = [s for s in rest if not (isinstance(s, Alloc) and s.buffer in tiles)]  # hoisted before the loop
        form = self._form(rest, prods, stages)
        if not isinstance(form, Tma):
            return form
        wanted = self.sw.warp_specialize is True or self._ws_pays(form, prods, blocks)
        if not (top_level and not self.ws_taken and wanted):
            return replace(form, refusals=(self._ws_refusal(form, top_level),))
        self.ws_taken = True
        if not split_placeable(self.kernel_body, written):
            return replace(form, refusals=(NOT_PLACEABLE,))
        rings, overlap = (), False
        parts = overlap_parts(seq(*rest)) if not form.wgmma and self.sw.overlap else None
        if parts is not None and static_ge(f.start, 0) and not static_ge(f.start, 1):
            split = ring_split(parts, {c: c.dst.buffer for c in prods})
            if stages >= 3 or split is not None:   # one ring for all copies needs three stages (overlap.py)
                overlap = True
                if split is not None:
                    rings = tuple(tuple(i for i, c in enumerate(prods) if c in group) for group in split)
        return WarpSpecialized(form, self.threads, blocks, asked, register_budgets(self.threads, blocks),
                               not self.manual_regs, rings, overlap, self.sw.pingpong)

    def _form(self, rest, prods, stages):
        """The unsplit form of a loop body `rest` fed by `prods`."""
        g = rest[0] if len(rest) == 1 and isinstance(rest[0], Gemm) else None
        plan = g.plan if g is not None else None
        loads = self._loads(prods) if self.sw.tma and not self.no_tma else None
        if self.sw.wgmma_async and isinstance(plan, WgmmaPlan):
            if loads is not None:
                return Tma(stages, loads, True)
            return WgmmaAsync(stages, self._tma_refusal(prods, True))
        if isinstance(plan, Mma80Plan) and g.a.buffer.scope == "shared" and g.b.buffer.scope == "shared":
            return CpAsync(stages, CpSync.MBARRIER if self.sw.mbarrier else CpSync.GEMM_HOOK,
                           self._tma_refusal(prods, False))
        if loads is not None:
            return Tma(stages, loads, False)
        return CpAsync(stages, CpSync.BLOCK, self._tma_refusal(prods, True))

    # ---- TMA ------------------------------------------------------------------------------------
    def _loads(self, prods):
        """A TmaLoad per producer when every one can load by TMA, else None."""
        loads = tuple(self._tma_load(c) for c in prods)
        return None if any(x is None for x in loads) else loads

    def _tma_load(self, c):
        """How c's shared tile is filled by TMA from its tensor of 2 to 5 dims, or None.  The tile is in the
        wgmma layout (2-D, swizzled) or plain (1-D or 2-D, row-major: a tile no tensor-core gemm reads).
        The copied region must be the tile: extent 1 in every tensor dim but the last (the tile's columns,
        contiguous) and, for a 2-D tile, one other (the `row dim`, the tile's rows)."""
        src, b, d = c.src, c.src.buffer, c.dst.buffer
        layout = self.smem_layouts.get(d)
        swizzled = layout == SWIZZLE_SM90
        if (id(b) not in self.params  # a view (T.Tensor(shape, dtype, X.data)) has no tensor to map
                or layout not in (None, SWIZZLE_SM90) or not tma_tensor_ok(b, d, swizzled)
                or not self.oob.zero_fill_ok(d, b)):  # TMA reads past the tensor as zeros
            return None
        ext = [int(e.value) if hasattr(e, "value") else e for e in src.extents]
        outer = [i for i in range(b.ndim - 1) if ext[i] != 1]
        row_dim = outer[0] if len(outer) == 1 else b.ndim - 2 if not outer else None
        shape = tuple(d.shape) if d.ndim == 2 else (1,) + tuple(d.shape)
        if row_dim is None or (ext[row_dim], ext[-1]) != shape:
            return None
        try:
            swizzle, boxes = tile_boxes(tuple(d.shape), d.dtype.bytes, swizzled)
        except ValueError:
            return None
        split = 0 if swizzled else row_split(d.shape[-1], d.dtype.bytes)
        if split and not (b.ndim <= 4 and b.shape[-1] == d.shape[-1] and isinstance(src.starts[-1], Const) and src.starts[-1].value == 0):
            return None   # a split row must be the tensor's whole row (tma_tensor_problem says so)
        return TmaLoad(swizzle, tuple(boxes), row_dim, split)

    def _tma_refusal(self, prods, async_form: bool) -> tuple:
        """Why a loop asked to use TMA does not (for the plan notes)."""
        if not self.sw.tma:
            return ()
        if self.no_tma:
            return (f"; tc.use_tma: {self.no_tma}",)
        if not async_form:
            return ("; tc.use_tma: only the asynchronous wgmma loop (tc.use_wgmma + tc.wgmma_async) loads by TMA",)
        bad = [(c.src.buffer.name, tma_copy_problem(c, id(c.src.buffer) in self.params,
                                                      self.smem_layouts.get(c.dst.buffer),
                                                      self.oob.zero_fill_ok(c.dst.buffer, c.src.buffer)))
               for c in prods if self._tma_load(c) is None]
        return ("; tc.use_tma: " + "; ".join(f"{name} is not loaded by TMA: {why}" for name, why in bad),)

    # ---- warp specialization --------------------------------------------------------------------
    def _ws_pays(self, form: Tma, prods, blocks: int) -> bool:
        """Whether "auto" warp-specializes this loop, as measured on the H200 (2026-11-30,
        benchmarks/NOTES.md session 4; the two-block form session 10): a loop body that is more than
        one async gemm (FlashAttention's) only when a block has its SM to itself anyway, and a
        one-gemm loop of one consumer warpgroup as two blocks per SM (`two_block_ring`).
        - The producer warpgroup and its register cap (one block per SM) cost a second block's
          latency hiding where one would fit: GEMM 128x128x64/3/256 0.68x cuBLAS split against
          0.90x unsplit; FlashAttention D64 128x128/2/256 0.83x SDPA against 0.94x.
        - A GEMM block alone on its SM (128x256x64/3/256) measured 0.93-0.97x split against
          0.96-1.00x unsplit: the unsplit loop's thread 0 already refills a stage while the async
          wgmmas run, and without a persistent tile scheduler there is no epilogue to hide.
        - FlashAttention D128 (128x128/2/256, alone on its SM) gained: 0.82 -> 0.87x full,
          0.83 -> 0.88x causal, its consumer warpgroups no longer meeting at a block barrier
          between the synchronous gemms and the softmax.
        - The README's GEMM (128x128x32/3/128) split as two blocks per SM with a 4-stage ring: fp16
          0.937x / 0.967x cuBLAS (4096^3 / 8192^3, means over seven machine starts) against
          0.941x / 0.976x unsplit in the same races (pipelining/warp_specialized.py).
        `tc.warp_specialize: True` splits wherever it applies."""
        if form.wgmma:
            return blocks == 2
        staged = sum((form.stages - 1) * c.dst.buffer.nbytes for c in prods)
        return 2 * (self.kernel_smem + staged) > self.smem_limit

    def _two_block_depth(self, written, loop, prods, stages: int) -> int:
        """The ring depth when this top-level loop (`written`: as in the kernel body; `loop`: its body
        visited) splits as two blocks per SM, else 0: a one-gemm wgmma loop fed by TMA and warp
        specialization asked for ("auto" or True)."""
        if self.sw.warp_specialize not in ("auto", True):
            return 0
        rest = [s for s in body_stmts(loop) if s not in prods]
        form = self._form(rest, prods, stages)
        if not (isinstance(form, Tma) and form.wgmma):
            return 0
        tiles = {c.dst.buffer for c in prods}
        return two_block_ring(self.threads, self.layouts[rest[0].c.buffer].num_regs, sum(t.nbytes for t in tiles),
                              stages, shared_bytes_beside(self.kernel_body, written, tiles))

    def _ws_refusal(self, form: Tma, top_level: bool) -> str:
        """Why "auto" leaves a TMA loop unsplit, for its plan note ('' when it was not asked to decide)."""
        if self.sw.warp_specialize != "auto":
            return ""
        if not top_level:
            why = "the loop is not at the kernel's top level, or the block is not whole warpgroups in x"
        elif self.ws_taken:
            why = "an earlier loop of the kernel took the producer warpgroup"
        elif form.wgmma:
            why = ("a one-gemm loop ran faster unsplit on the H200 (128x256 tiles 1.00x cuBLAS against 0.94x split); "
                   "it splits only as two blocks per SM, for one consumer warpgroup of 128 accumulator registers a "
                   "thread with room for a 4-stage ring (128x128 fp16: 0.94x / 0.97x split, 0.94x / 0.98x unsplit)")
        else:
            why = ("two blocks' shared memory fits on an SM (registers are not counted), and the split would keep one "
                   "(FlashAttention D64: 0.94x SDPA against 0.83x)")
        # worded without "warp-specialized", which the notes of split loops (and tests) look for
        return f"; no producer warpgroup (tc.warp_specialize \"auto\": {why}; True splits it)"

    # ---- persistent tiles -----------------------------------------------------------------------
    def _plan_walk(self, k: Kernel):
        """(loop, TileWalk) when kernel `k` walks its tiles, else None (pipelining/persistent.py).
        Where the program asked for the walk (`tc.persistent_tiles: True`) and it is not taken, the
        plan says why (a note on the kernel's first T.Pipelined loop, or on the kernel)."""
        walk, why = self._walk_or_why(k)
        if walk is None and why and self.sw.persistent is True:
            loops = collect(k.body, lambda n: isinstance(n, For) and n.kind == "pipelined")
            self.notes.append(f"{where(loops[0].span if loops else k.span)}: tc.persistent_tiles True not "
                              f"taken: {why}")
        return walk

    def _walk_or_why(self, k: Kernel):
        """((loop, TileWalk), None), or (None, why the walk is not taken; "" where it was not asked for)."""
        sw = self.sw
        if sw.persistent is False:
            return None, ""
        if not (sw.tma and sw.wgmma_async):
            return None, "it needs TMA loads and async wgmma (sm_90a, tc.use_tma and tc.wgmma_async on)"
        if sw.warp_specialize is True:
            return None, "tc.warp_specialize True asks for the producer-warpgroup form instead"
        if self.symbols:
            return None, "the kernel has size symbols (the walk needs a static grid)"
        if len(k.grid) != 2 or not all(isinstance(g, Const) for g in k.grid):
            return None, "the walk needs a static two-dimensional grid"
        if any(t != 1 for t in k.threads[1:]):
            return None, "the walk needs one-dimensional threads"
        loops = collect(k.body, lambda n: isinstance(n, For) and n.kind == "pipelined")
        top = flat(k.body)
        if len(loops) != 1 or loops[0] not in top:
            return None, "the walk needs exactly one T.Pipelined loop, at the kernel's top level"
        f = loops[0]
        S = f.annotation("num_stages", 0)
        if not (isinstance(f.extent, Const) and isinstance(f.start, Const) and f.start.value == 0 and f.step == 1
                and 2 <= S <= int(f.extent.value)):
            return None, ("the main loop needs a constant trip count from 0, step 1, and 2 or more stages "
                          "(no more than its iterations)")
        prods = producers(f)
        rest = [s for s in flat(f.body) if s not in prods]
        if not prods or len(rest) != 1 or not isinstance(rest[0], Gemm) or not isinstance(rest[0].plan, WgmmaPlan):
            return None, ("the main loop must be tile copies from global memory that can load ahead and one "
                          "wgmma T.gemm (a copy indexed by a value read from memory cannot load ahead)")
        form = self._form(rest, prods, S)
        if not (isinstance(form, Tma) and form.wgmma):
            return None, "the main loop's copies do not all load by TMA"
        tiles_of_loop = {c.dst.buffer for c in prods}
        if any(n.buffer in tiles_of_loop for s in top if s is not f
               for n in collect(s, lambda n: isinstance(n, (Load, Store, Ref, Region)))):
            # the next tile's loads land in the ring while this tile's epilogue runs
            return None, "a tile the main loop loads is used outside it (the next tile's loads overwrite it)"
        bx, by = k.block_vars
        allowed = {f.var, bx, by}
        if any(not set(collect(c.src, lambda n: isinstance(n, Var))) <= allowed or collect(c.src, lambda n: isinstance(n, Load))
               for c in prods):
            # a k-tile's source must follow from (ko, bx, by) alone: the next tile's is issued early
            return None, "a copy's source depends on more than the loop index and the block indices"
        gx, gy = int(k.grid[0].value), int(k.grid[1].value)
        tiles, n = gx * gy, int(f.extent.value)
        ring = S * sum(c.dst.buffer.nbytes for c in prods)
        smem = self.kernel_smem + (S - 1) * sum(c.dst.buffer.nbytes for c in prods) + 1024 * (len(top) + S)
        if smem > self.smem_limit:
            return None, f"its shared memory ({smem} bytes with the ring) is over the {self.smem_limit} available"
        if tiles <= self.num_sms:
            return None, f"{tiles} tiles fill no more than one wave of {self.num_sms} SMs"
        if sw.persistent == "auto" and (n > AUTO_MAX_K_TILES or tiles < AUTO_MIN_WAVES * self.num_sms
                                        or ring <= self.smem_limit // 2):
            return None, ""
        swz = [s for s in top if isinstance(s, Annotate) and s.key == AnnotationKey.USE_SWIZZLE]
        it, block = Var("tile_it"), Var("tile_block")
        blocks = min(tiles, self.num_sms)
        walk = TileWalk(it, block, blocks, tiles, (), n)
        cx, cy = tile_coords(walk.tile(it), gx, gy, swz[0].value[0] if swz else None)
        return (f, replace(walk, coords=((bx, cx), (by, cy)))), None


def plan_pipelines(func: PrimFunc, ctx) -> PrimFunc:
    if not ctx.target.has("cp_async"):
        return func
    st = func.lowering
    if is_manual(func.body):  # the program orders its warp groups itself (T.ws, mbarriers): no second split
        return func.with_lowering(plan_notes=st.plan_notes + (MANUAL_NOTE,))
    p = _Planner(Switches.of(ctx.options), ctx.target, st.fragment_layouts, st.smem_layouts, func.params,
                 func.symbols, func.body)
    body = p.visit(func.body)
    return func.with_body(body).with_lowering(plan_notes=st.plan_notes + tuple(p.notes))

"""Software pipelining of `T.Pipelined(n, num_stages=S)` loops (CUDA targets, S >= 2).

Before: a loop whose body copies global tiles into shared tiles and computes on them.
After: each such shared tile has S buffers; the copies for iteration `ko + S - 1` are issued
asynchronously (cp.async) while iteration `ko` computes on its own buffer:

    prologue: issue copies of iterations 0 .. S-2 into buffers 0 .. S-2, one commit group each
    for ko in range(n):
        wait until at most S-2 groups are in flight   (iteration ko's data has landed)
        barrier                                       (everyone's data visible; buffer (ko-1)%S free)
        issue copies of iteration ko+S-1 into buffer (ko+S-1)%S; commit
        compute on buffer ko%S
    wait for all groups

When the rest of the body is a single tensor-core gemm on shared tiles (a plain GEMM main loop),
the synchronisation moves into that gemm, just before its last k16 step (`Gemm.pipeline_hook`,
see device/include/tilecraft/pipeline.h), in one of two forms:
- block barrier (`tc::PipelineBarrier`), with one wait + barrier ahead of the loop: the same
  protocol shifted; the barrier inside gemm ko comes after every warp's last read of stage ko
  (so iteration ko+1 may overwrite it) and after iteration ko+1's data has landed;
- per-stage mbarriers (`tc::pipe_*`), opt-in with `pass_configs={"tc.mbarrier_pipeline": True}`:
  copies of tile t arrive on full[t % S] as they land, readers of tile t arrive on empty[t % S];
  each warp waits only for the stage it needs.  On the H200 a hand-rewritten kernel gained 4%
  with one 128x256x64 block per SM and lost 4% with two 128x128 blocks per SM
  (benchmarks/gemm_anatomy.py), but the generated one measured the same as the block barrier in
  the benchmark (0.55x cuBLAS either way), so the block barrier stays the default.

A single wgmma gemm (Hopper, `tc.use_wgmma`) with `pass_configs={"tc.wgmma_async": True}` keeps
one wgmma group in flight across iterations instead (checked on the H200: 0.81-0.87x cuBLAS):

    for ko in range(n):
        wait until tile ko has landed; fence the async proxy; barrier     (the gemm's lowering)
        issue tile ko's wgmmas, commit; wait until only they are in flight (tile ko-1 retired)
        barrier                                       (every warpgroup retired tile ko-1)
        issue copies of tile ko+S-1 into tile ko-1's buffer; commit
    wait for the last wgmma group (tc::wgmma_drain; loop and drain under `if (n > 0)` when n may
    be 0), then for all copies

With `pass_configs={"tc.use_tma": True}` as well (the sm_90a default), and every producer a whole tile
of a tensor with static strides and 16-byte rows, thread 0 loads each tile with
TMA boxes (layout/tma.py) instead, counted against a per-stage mbarrier, and every thread waits
on that mbarrier instead of cp.async groups and a barrier:

    for ko in range(n):
        wait for full[ko % S] (parity (ko / S) % 2)
        issue tile ko's wgmmas, commit; wait until only they are in flight
        barrier                                       (every warpgroup retired tile ko-1)
        thread 0: expect the bytes of tile ko+S-1 on full[(ko-1) % S], issue its TMA boxes

The kernel gets one tensor-map parameter per such copy (the lowering state's `tma_descs`; the
launcher builds the maps from the tensors at each call, runtime/tma.py).  Staged copies of
swizzled tiles keep their tile's swizzle (the lowering state's `smem_layouts`).

A copy is a producer only if its source indices depend on nothing computed inside the loop.
Loops that do not fit (no producer copies, S < 2) stay serial loops with synchronous copies.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import TilecraftError
from ..ir import (Alloc, Buffer, Copy, For, Gemm, If, Kernel, Load, Mutator, Ref, Region,
                  Seq, Stmt, Store, Sync, Var, binary, collect, const, seq, substitute, where,
                  dtype as dt)
from ..ir import intrinsics as I
from ..ir.expr import BuiltinVar, thread_index
from ..ir.func import PrimFunc
from ..ir.lowering import SWIZZLE_SM80, SWIZZLE_SM90, Mma80Plan, TmaDescriptor, WgmmaPlan, WgmmaRSPlan
from ..options import Options, options_of
from ..layout.tma import sm90_tile_boxes, tma_copy_problem, tma_tensor_ok
from ..ir.oob import OutOfBounds, out_of_bounds
from .plan_shared_layouts import swizzle_ok
from .warp_groups import is_manual
from .overlap_gemms import overlap_parts, ring_split
from .persistent_tiles import PersistentForms
from .warp_specialize import WarpSpecializedForms, flat, place_warp_specialized


_call = I.evaluate


class _Restage(Mutator):
    """Point every use of a multi-buffered tile at the stage `stage`."""

    def __init__(self, staged: dict, stage):
        super().__init__()
        self.staged, self.stage = staged, stage

    def visit_Region(self, r: Region):
        nb = self.staged.get(r.buffer)
        if nb is None:
            return Mutator.generic(self, r)
        starts = tuple(self.visit(x) for x in r.starts)
        return Region(nb, (self.stage,) + starts, (1,) + tuple(r.extents), span=r.span)

    def visit_Load(self, e: Load):
        nb = self.staged.get(e.buffer)
        if nb is None:
            return Mutator.generic(self, e)
        return Load(nb, (self.stage,) + tuple(self.visit(i) for i in e.indices), span=e.span)

    def visit_Store(self, s: Store):
        nb = self.staged.get(s.buffer)
        if nb is None:
            return Mutator.generic(self, s)
        return Store(nb, (self.stage,) + tuple(self.visit(i) for i in s.indices), self.visit(s.value), span=s.span)


def _producers(loop: For) -> list:
    body = loop.body.stmts if isinstance(loop.body, Seq) else (loop.body,)
    local_vars = {s.var for s in collect(loop.body, lambda n: type(n).__name__ == "Let")}
    out = []
    for s in body:
        if (isinstance(s, Copy) and s.src.buffer.scope == "global" and s.dst.buffer.scope == "shared"
                and s.dst.covers_whole()):
            used = collect(s.src, lambda n: isinstance(n, (Var, Load)))
            if any(isinstance(u, Load) or u in local_vars for u in used):
                continue
            out.append(s)
    return out


class _Pipeline(WarpSpecializedForms, PersistentForms, Mutator):
    def __init__(self, smem_layouts: dict, layouts: dict, configs: Options, target, symbols=()):
        super().__init__()
        self.smem_limit = target.max_shared_memory   # bytes of shared memory one block may use
        self.num_sms = target.num_sms
        self.symbols = symbols         # the program's size symbols (a persistent walk needs none)
        self.persistent = configs.persistent_tiles
        self.walk = None               # the kernel's persistent_tiles.TileWalk, when it walks its tiles
        self.params: set = set()       # ids of the kernel's parameters: TMA maps are built from these only
        self.oob = OutOfBounds()       # T.annotate_safe_value / T.annotate_padding: TMA fills with zeros only
        self.kernel_smem = 0           # the kernel's shared buffers, unstaged
        self.layouts = layouts
        self.use_mbarrier = configs.mbarrier_pipeline
        self.wgmma_async = configs.wgmma_async
        self.use_tma = configs.use_tma and not configs.disable_tma_lower
        self.warp_specialize = False if configs.disable_warp_specialized else configs.warp_specialize
        self.overlap_gemms = configs.overlap_gemms
        self.overlap_pingpong = configs.overlap_pingpong
        self.ws_loops: set = set()   # ids of the kernel's top-level T.Pipelined loops (may be split)
        self.ws_taken = False        # one warp-specialized loop per kernel
        self.notes: list = []  # one line per pipelined loop: the form chosen
        self.tma_descs: list = []  # (global buffer, (box rows, box cols), swizzle) per kernel parameter
        self.threads = 0
        self.smem_layouts = smem_layouts  # shared buffer -> swizzle kind; staged tiles are added
        self.allocs: dict = {}  # old shared buffer -> staged buffer
        self.finals: list = []  # per pipelined loop: (its old tile -> staged tile, the stage its last iteration used)

    def visit_Kernel(self, k: Kernel):
        self.threads = k.num_threads
        self.kernel_smem = sum(a.buffer.nbytes for a in collect(k.body, lambda n: isinstance(n, Alloc))
                               if a.buffer.scope == "shared")
        self.walk = self._plan_walk(k, _producers, self.symbols)
        if self.walk is not None:
            k = self._walk_kernel(k, self.walk)
        self.kernel_body = k.body
        one_d = all(t == 1 for t in k.threads[1:])
        self.ws_loops = {id(s) for s in flat(k.body) if isinstance(s, For) and s.kind == "pipelined"
                         and self.warp_specialize and one_d and self.threads % 128 == 0}
        self.ws_taken = False
        out = place_warp_specialized(Mutator.generic(self, k), self.notes, _UNSPLIT_NOTES)
        return out if self.walk is None else self._placed_walk(out, self.walk)

    def visit_For(self, f: For):
        top_level = id(f) in self.ws_loops
        walked = self.walk is not None and f is self.walk.loop   # its ring counts across the walk's tiles
        written = f
        f = Mutator.generic(self, f)
        stages = f.annotation("num_stages", 0) if f.kind == "pipelined" else 0
        if stages < 2:
            return f
        producers = _producers(f)
        if not producers:
            return f
        asked, blocks = stages, 1
        if top_level and not walked and not self.ws_taken:
            depth = self._two_block_depth(written, f, producers, stages)
            if depth:
                stages, blocks = depth, 2
        staged = {}
        for c in producers:
            b = c.dst.buffer
            if b in staged:
                continue
            nb = Buffer(b.name, (stages,) + tuple(b.shape), b.dtype, "shared", span=b.span)
            staged[b] = nb
            kind = self.smem_layouts.get(b)
            if kind == SWIZZLE_SM80 and (b.numel // b.shape[-1]) % 8 == 0 and swizzle_ok(nb):
                self.smem_layouts[nb] = SWIZZLE_SM80
            if kind == SWIZZLE_SM90:  # stages start on whole 8-row panels: rows per stage % 8 == 0
                if (b.numel // b.shape[-1]) % 8:
                    raise TilecraftError(f"{b.name}: wgmma operand tiles need a multiple of 8 rows", f.span)
                self.smem_layouts[nb] = SWIZZLE_SM90
        self.allocs.update(staged)
        ko = f.var
        self.finals.append((staged, binary("%", binary("-", binary("+", f.start, f.extent), 1), stages)))

        def issue(it):
            cps = []
            for c in producers:
                src = substitute(c.src, {ko: it})
                dst = _Restage(staged, binary("%", it, stages)).visit(Region.whole(c.dst.buffer))
                cps.append(Copy(src, dst, "async", span=c.span))
            return seq(*cps)
        rest = [s for s in (f.body.stmts if isinstance(f.body, Seq) else (f.body,)) if s not in producers]
        # tiles allocated inside the loop body (TileLang scopes every allocation to the kernel) are
        # declared before the loop: the prologue already fills them
        hoisted = [s for s in rest if isinstance(s, Alloc) and s.buffer in staged]
        rest = [s for s in rest if s not in hoisted]
        compute = _Restage(staged, binary("%", self.walk.count(ko) if walked else ko, stages)).visit(seq(*rest))
        loop = _Loop(f, stages, issue, rest, compute, producers, staged, blocks)
        form = "persistent_tma" if walked else self._form(rest, producers)
        unsplit = self._ws_refusal(loop, form, top_level)
        if (form in ("wgmma_tma", "plain_tma") and top_level and not self.ws_taken
                and (self.warp_specialize is True or self._ws_pays(loop, form))):
            unsplit = ""
            form, self.ws_taken = form.replace("_tma", "_ws"), True
            parts = overlap_parts(self._fed(loop)) if form == "plain_ws" and self.overlap_gemms else None
            # one ring for all copies needs three stages (overlap_gemms.py); split rings do with two
            if parts is not None and _static_ge(f.start, 0) and not _static_ge(f.start, 1) and (
                    stages >= 3 or ring_split(parts, {c: staged[c.dst.buffer] for c in producers}) is not None):
                form = "overlap_ws"
        self.notes.append(f"{where(f.span)}: T.Pipelined, {stages} stages, "
                          f"{_FORM_NOTES[form]}{self.walk.note() if walked else ''}"
                          f"{self._two_block_note(loop, asked) if form == 'wgmma_ws' else ''}"
                          f"{self._tma_refusal(form, producers)}{unsplit}")
        out = getattr(self, f"_{form}")(loop)
        return seq(*hoisted, out) if hoisted else out

    # ---- the loop forms (module docstring) ------------------------------------------------------
    def _form(self, rest, producers) -> str:
        g = rest[0] if len(rest) == 1 and isinstance(rest[0], Gemm) else None
        plan = g.plan if g is not None else None
        if self.wgmma_async and isinstance(plan, WgmmaPlan):
            if self.use_tma and all(self._tma_plan(c) is not None for c in producers):
                return "wgmma_tma"
            return "wgmma_async"
        mma_ss = (isinstance(plan, Mma80Plan) and g.a.buffer.scope == "shared" and g.b.buffer.scope == "shared")
        if mma_ss:
            return "mbarrier" if self.use_mbarrier else "barrier_in_gemm"
        if self.use_tma and all(self._tma_plan(c) is not None for c in producers):
            return "plain_tma"
        return "plain"

    def _plain(self, lp):
        body = seq(lp.wait, Sync(), lp.issue_next(), _call(I.CpAsyncCommit()), lp.compute)
        return seq(*lp.prologue(), lp.loop(body), _call(I.CpAsyncWaitAll()), Sync())

    def _barrier_in_gemm(self, lp):
        g = lp.gemm(pipeline_hook=I.call(I.PipelineBarrier(lp.stages - 2)))
        body = seq(lp.issue_next(), _call(I.CpAsyncCommit()), g)
        return seq(*lp.prologue(), lp.wait, Sync(), lp.loop(body), _call(I.CpAsyncWaitAll()), Sync())

    def _mbarrier(self, lp):
        S = lp.stages
        bar = Buffer("pipe_bar", (2 * S,), dt.uint64, "shared", span=lp.f.span)
        ref = Ref(bar, (const(0),))
        g = lp.gemm(pipeline_hook=I.call(I.PipeRelease(S), ref, lp.ko))
        head = [Alloc(bar), _call(I.PipeInit(S), ref, const(self.threads)), Sync()]
        body = seq(lp.issue_next(_call(I.PipeAcquire(S), ref, lp.nxt),
                                 _call(I.PipeCommit(S), ref, lp.nxt)),
                   _call(I.PipeWait(S), ref, lp.ko), g)
        return seq(*head, *lp.prologue(lambda t: _call(I.PipeCommit(S), ref, t)), lp.loop(body),
                   _call(I.CpAsyncWaitAll()), Sync(), _call(I.PipeInval(S), ref), Sync())

    def _wgmma_async(self, lp):
        g = lp.gemm(async_groups=1)
        body = seq(lp.wait, g, Sync(), lp.issue_next(), _call(I.CpAsyncCommit()))
        return seq(*lp.prologue(), self._drained(lp, body, g), _call(I.CpAsyncWaitAll()), Sync())

    def _drained(self, lp, body, g, unroll: int = 0):
        """The loop, then the wait for its last wgmma group.  A loop that may run zero times would
        reach the drain with accumulators no wgmma wrote, and ptxas then serialises every wgmma
        in the loop (C7515): such a loop and its drain go under `if (n > 0)`."""
        drain = _call(I.WgmmaDrain(self.layouts[g.c.buffer].num_regs), Ref(g.c.buffer, (const(0),)))
        main = seq(lp.loop(body, unroll), drain)
        return main if _static_ge(lp.n, 1) else If(binary("<", const(0), lp.n), main)

    def _tma_refusal(self, form, producers) -> str:
        """Why a loop asked to use TMA does not (for the plan notes)."""
        if not self.use_tma or form in ("wgmma_tma", "wgmma_ws", "plain_tma", "plain_ws", "overlap_ws", "persistent_tma"):
            return ""
        if form not in ("wgmma_async", "plain"):
            return "; tc.use_tma: only the asynchronous wgmma loop (tc.use_wgmma + tc.wgmma_async) loads by TMA"
        bad = [(c.src.buffer.name, tma_copy_problem(c, id(c.src.buffer) in self.params,
                                                      self.smem_layouts.get(c.dst.buffer) == SWIZZLE_SM90,
                                                      self.oob.zero_fill_ok(c.dst.buffer, c.src.buffer)))
               for c in producers if self._tma_plan(c) is None]
        return "; tc.use_tma: " + "; ".join(f"{name} is not loaded by TMA: {why}" for name, why in bad)

    def _tma_plan(self, c: Copy):
        """(swizzle, boxes, row dim) filling c's 2-D shared tile by TMA from its tensor of 2 to 5
        dims, or None.  The copied region must be the tile: extent 1 in every tensor dim but the
        last (the tile's columns, contiguous) and one other (the `row dim`, the tile's rows)."""
        src, b, d = c.src, c.src.buffer, c.dst.buffer
        if (id(b) not in self.params  # a view (T.Tensor(shape, dtype, X.data)) has no tensor to map
                or self.smem_layouts.get(d) != SWIZZLE_SM90 or not tma_tensor_ok(b, d)
                or not self.oob.zero_fill_ok(d, b)):  # TMA reads past the tensor as zeros
            return None
        ext = [int(e.value) if hasattr(e, "value") else e for e in src.extents]
        outer = [i for i in range(b.ndim - 1) if ext[i] != 1]
        row_dim = outer[0] if len(outer) == 1 else b.ndim - 2 if not outer else None
        if row_dim is None or (ext[row_dim], ext[-1]) != tuple(d.shape):
            return None
        try:
            swizzle, boxes = sm90_tile_boxes(d.shape[0], d.shape[1], d.dtype.bytes)
        except ValueError:
            return None
        return swizzle, boxes, row_dim

    def _tma_loads(self, lp) -> list:
        """(copy, boxes, tensor-map var) per producer copy; each copy becomes a kernel parameter."""
        loads = []
        for c in lp.producers:
            swizzle, boxes, row_dim = self._tma_plan(c)
            desc = BuiltinVar(f"tc_tma_{len(self.tma_descs)}")  # the kernel's pointer to its tensor map (codegen)
            box = [1] * c.src.buffer.ndim                        # the box, one size per tensor dim
            box[row_dim], box[-1] = boxes[0][3], boxes[0][4]
            self.tma_descs.append((c.src.buffer, tuple(box), swizzle))  # as TmaDescriptor below
            loads.append((c, boxes, desc, row_dim))
        return loads

    def _tma_issue(self, lp, loads, bar, t, subst=None) -> Stmt:
        """Announce tile t's bytes on bar[t % S] and issue its boxes into stage t % S (one thread);
        the copies' sources with `subst` substituted (default: ko = t)."""
        stage = binary("%", t, lp.stages)
        full = Ref(bar, (stage,))
        nbytes = sum(c.dst.buffer.nbytes for c, *_ in loads)
        calls = [_call(I.TmaExpect(), full, const(nbytes))]
        for c, boxes, desc, row_dim in loads:
            starts = substitute(c.src, {lp.ko: t} if subst is None else subst).starts
            base = Ref(lp.staged[c.dst.buffer], (stage, const(0), const(0)))
            for off, r0, c0, _, _ in boxes:
                at = list(starts)
                at[row_dim], at[-1] = binary("+", at[row_dim], r0), binary("+", at[-1], c0)
                calls.append(_call(I.TmaLoadTile(), base, const(off), desc, full, *reversed(at)))  # innermost first
        return seq(*calls)

    def _wgmma_tma(self, lp, loads=None):
        """Wait for tile ko, issue its wgmmas (tile ko-1's retire), barrier, then thread 0 refills
        tile ko-1's stage with tile ko+S-1 while tile ko's wgmmas run."""
        g = lp.gemm(async_groups=1, tma_fed=True)
        return self._tma_loop(lp, lambda wait, issue: seq(wait, g, Sync(), issue),
                              lambda body: self._drained(lp, body, g), loads)

    def _plain_tma(self, lp, loads=None):
        """Any loop body (FlashAttention's, say) on TMA loads, in the order of the cp.async plain
        form: wait for tile ko on its stage's mbarrier, barrier (everyone is done with tile ko-1),
        thread 0 issues tile ko+S-1 into that stage, then the body runs while it loads."""
        compute = self._fed(lp)
        return seq(_call(I.FenceProxyAsyncShared()), Sync(),
                   self._tma_loop(lp, lambda wait, issue: seq(wait, Sync(), issue, compute), lp.loop, loads))

    def _fed(self, lp):
        """The loop body with its wgmmas marked `tma_fed` where every shared operand is a tile
        this loop loads by TMA or one nothing in the loop writes: such a gemm needs no proxy fence
        and no barrier of its own (the stage's mbarrier wait orders the TMA writes; one fence and
        barrier ahead of the loop, which the form puts there, order the writes before it)."""
        written = {b for n in collect(lp.f.body, lambda n: isinstance(n, (Copy, Store)))
                   for b in ([n.dst.buffer] if isinstance(n, Copy) else [n.buffer])}
        staged = set(lp.staged.values())

        class Feed(Mutator):
            def visit_Gemm(self, g):
                ops = [x.buffer for x in (g.a, g.b) if x.buffer.scope == "shared"]
                if isinstance(g.plan, (WgmmaPlan, WgmmaRSPlan)) and all(b in staged or b not in written for b in ops):
                    return replace(g, tma_fed=True)
                return g
        return Feed().visit(lp.compute)

    def _tma_loop(self, lp, order, close, loads=None):
        S, ko = lp.stages, lp.ko
        loads = self._tma_loads(lp) if loads is None else loads
        bar = Buffer("tma_bar", (S,), dt.uint64, "shared", span=lp.f.span)
        tid0 = binary("==", thread_index(), 0)
        wait = _call(I.MbarWaitParity(), Ref(bar, (binary("%", ko, S),)), binary("%", binary("//", ko, S), 2))
        body = order(wait, If(binary("<", lp.nxt, lp.n), If(tid0, self._tma_issue(lp, loads, bar, lp.nxt))))
        bars = [Ref(bar, (const(s),)) for s in range(S)]
        head = [Alloc(bar), If(tid0, seq(*[_call(I.MbarInit(), r, const(1)) for r in bars])), Sync()]
        prologue = []
        for s in range(S - 1):
            tile = If(tid0, self._tma_issue(lp, loads, bar, const(s)))
            prologue.append(tile if _static_ge(lp.n, s + 1) else If(binary("<", const(s), lp.n), tile))
        tail = [Sync(), If(tid0, seq(*[_call(I.MbarInval(), r) for r in bars])), Sync()]
        return seq(*head, *prologue, close(body), *tail)

    def visit_Alloc(self, a):
        return a

    def visit_Seq(self, s: Seq):
        """Statements around a pipelined loop that use its tiles (the program reads A's last k-tile after
        the loop, say) use one stage of the staged tile: the last iteration's after the loop (the refills
        stop S-1 tiles before the end, so it still holds that tile), stage 0 before it."""
        out, after, marks = [], [], []
        for st in s.stmts:
            n0 = len(self.finals)
            v = self.visit(st)
            for staged, stage in after:
                v = _Restage(staged, stage).visit(v)
            after.extend(self.finals[n0:])
            marks.append(len(self.finals))
            out.append(v)
        for i in range(len(out)):
            for staged, _ in self.finals[marks[i]:marks[-1]]:   # loops in later statements
                out[i] = _Restage(staged, const(0)).visit(out[i])
        return s if all(a is b for a, b in zip(out, s.stmts)) else replace(s, stmts=tuple(out))


_FORM_NOTES = {
    "plain": "cp.async copies issued a tile ahead, wait + barrier per iteration",
    "barrier_in_gemm": "cp.async copies issued a tile ahead, wait + barrier inside the mma.sync gemm",
    "mbarrier": "cp.async copies on per-stage mbarriers",
    "wgmma_async": "cp.async copies, one wgmma group kept in flight",
    "wgmma_tma": "TMA tile loads on per-stage mbarriers, one wgmma group kept in flight",
    "persistent_tma": "TMA tile loads on per-stage mbarriers, one wgmma group kept in flight",
    "plain_tma": "TMA tile loads issued a tile ahead on per-stage mbarriers, barrier per iteration",
    "wgmma_ws": ("warp-specialized: a producer warpgroup issues TMA tile loads into a ring of full/empty "
                 "mbarriers, consumer warpgroups keep one wgmma group in flight"),
    "plain_ws": ("warp-specialized: a producer warpgroup issues TMA tile loads into a ring of full/empty "
                 "mbarriers, consumer warps release each stage after the body"),
    "overlap_ws": ("warp-specialized: a producer warpgroup issues TMA tile loads into a ring of full/empty "
                   "mbarriers, consumer warpgroups run each iteration's first gemm and softmax while the "
                   "previous iteration's second gemm runs (wgmma in flight)"),
}


_UNSPLIT_NOTES = {_FORM_NOTES["wgmma_ws"]: _FORM_NOTES["wgmma_tma"], _FORM_NOTES["plain_ws"]: _FORM_NOTES["plain_tma"],
                  _FORM_NOTES["overlap_ws"]: _FORM_NOTES["plain_tma"]}


class _Loop:
    """One T.Pipelined loop being rewritten: its parts and the pieces every form is built from."""

    def __init__(self, f: For, stages: int, issue, rest, compute, producers, staged, blocks: int = 1):
        self.f, self.stages, self.issue, self.rest, self.compute = f, stages, issue, rest, compute
        self.producers, self.staged = producers, staged  # the copies, and old tile -> staged tile
        self.blocks = blocks  # 2: split as two blocks per SM (warp_specialize.two_block_ring)
        self.n, self.ko = f.extent, f.var
        self.nxt = binary("+", self.ko, stages - 1)
        self.wait = _call(I.CpAsyncWait(stages - 2))

    def prologue(self, close=None) -> list:
        """Copies of tiles 0 .. S-2 (those past the loop's extent skipped).  Each is followed by a
        commit, even when skipped (the waits count S-1 groups, empty ones included), or, with
        `close`, by `close(tile)` only when the tile exists (an mbarrier arrival)."""
        out = []
        for s in range(self.stages - 1):
            tile = self.issue(const(s)) if close is None else seq(self.issue(const(s)), close(const(s)))
            out.append(tile if _static_ge(self.n, s + 1) else If(binary("<", const(s), self.n), tile))
            if close is None:
                out.append(_call(I.CpAsyncCommit()))
        return out

    def issue_next(self, before=None, after=None):
        """Copies of tile ko+S-1 when it exists (optionally wrapped in `before` / `after`)."""
        return If(binary("<", self.nxt, self.n), seq(before, self.issue(self.nxt), after))

    def gemm(self, **fields):
        """The loop's gemm (on stage ko) with `fields` set (its plan travels with it)."""
        return replace(self.compute, **fields)

    def loop(self, body, unroll: int = 0) -> For:
        """The rewritten loop; `unroll`: a partial unroll by that many iterations (#pragma unroll N)."""
        f = self.f
        return For(self.ko, f.start, self.n, "serial", body, f.step, (("unroll", unroll),) if unroll else (),
                   span=f.span)


def _static_ge(n, k) -> bool:
    from ..ir.expr import Const
    return isinstance(n, Const) and n.value >= k


class _ReplaceAllocs(Mutator):
    def __init__(self, allocs):
        super().__init__()
        self.allocs = allocs

    def visit_Alloc(self, a):
        nb = self.allocs.get(a.buffer)
        return a if nb is None else type(a)(nb, a.init, span=a.span)


def pipeline_copies(func: PrimFunc, target) -> PrimFunc:
    if not target.has("cp_async"):
        return func
    if is_manual(func.body):  # the program orders its warp groups itself (T.ws, mbarriers): no second split
        note = ("T.Pipelined: not pipelined by the compiler: the kernel synchronises its warp groups by hand "
                "(T.ws / T.alloc_barrier), so its loops run as written")
        return func.with_lowering(plan_notes=func.lowering.plan_notes + (note,))
    st = func.lowering
    p = _Pipeline(dict(st.smem_layouts), st.fragment_layouts, options_of(func), target, func.symbols)
    p.params = {id(b) for b in func.params}
    p.oob = out_of_bounds(func.body)
    body = p.visit(func.body)
    notes = st.plan_notes + tuple(p.notes)
    if not p.allocs:
        return func.with_lowering(plan_notes=notes)
    body = _ReplaceAllocs(p.allocs).visit(body)
    index = {id(b): i for i, b in enumerate(func.params)}
    descs = tuple(TmaDescriptor(index[id(b)], tuple(box), sw, b.name) for b, box, sw in p.tma_descs)
    smem_layouts = {b: k for b, k in p.smem_layouts.items() if b not in p.allocs}  # the staged tiles replace theirs
    return func.with_body(body).with_lowering(smem_layouts=smem_layouts, plan_notes=notes,
                                              tma_descs=st.tma_descs + descs)

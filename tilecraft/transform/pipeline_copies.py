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

With `pass_configs={"tc.use_tma": True}` as well, and every producer a whole 2-D tile of a 2-D
tensor with static shape and 16-byte rows (NOT YET RUN ON HARDWARE), thread 0 loads each tile with
TMA boxes (layout/tma.py) instead, counted against a per-stage mbarrier, and every thread waits
on that mbarrier instead of cp.async groups and a barrier:

    for ko in range(n):
        wait for full[ko % S] (parity (ko / S) % 2)
        issue tile ko's wgmmas, commit; wait until only they are in flight
        barrier                                       (every warpgroup retired tile ko-1)
        thread 0: expect the bytes of tile ko+S-1 on full[(ko-1) % S], issue its TMA boxes

The kernel gets one tensor-map parameter per such copy (func attr "tma_descs"; the launcher
builds the maps from the tensors at each call, runtime/tma.py).

A copy is a producer only if its source indices depend on nothing computed inside the loop.
Loops that do not fit (no producer copies, S < 2) stay serial loops with synchronous copies.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import TilecraftError
from ..ir import (Alloc, Buffer, Call, Copy, Evaluate, For, Gemm, If, Kernel, Load, Mutator, Ref, Region,
                  Seq, Store, Sync, Var, binary, collect, const, seq, substitute, where, dtype as dt)
from ..ir.expr import BuiltinVar, thread_index
from ..ir.func import PrimFunc
from ..options import Options, options_of
from ..layout.tma import sm90_tile_boxes
from .plan_shared_layouts import swizzle_ok


def _call(name, *args):
    return Evaluate(Call(name, tuple(args), dt.int32))


class _Restage(Mutator):
    """Point every use of a multi-buffered tile at the stage `stage`."""

    renamed: dict = {}  # old Gemm node -> rebuilt node (plans are keyed by node identity)

    def __init__(self, staged: dict, stage):
        super().__init__()
        self.staged, self.stage = staged, stage

    def visit_Gemm(self, g):
        out = Mutator.generic(self, g)
        if out is not g:
            _Restage.renamed[g] = out
        return out

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


class _Pipeline(Mutator):
    def __init__(self, swizzled: set, hopper: set, plans: dict, layouts: dict, configs: Options):
        super().__init__()
        self.plans, self.layouts = plans, layouts
        self.use_mbarrier = configs.mbarrier_pipeline
        self.wgmma_async = configs.wgmma_async
        self.use_tma = configs.use_tma
        self.notes: list = []  # one line per pipelined loop: the form chosen
        self.tma_descs: list = []  # (global buffer, (box rows, box cols), swizzle) per kernel parameter
        self.threads = 0
        self.swizzled = swizzled
        self.hopper = hopper
        self.allocs: dict = {}  # old shared buffer -> staged buffer

    def visit_Kernel(self, k: Kernel):
        self.threads = k.num_threads
        return Mutator.generic(self, k)

    def visit_For(self, f: For):
        f = Mutator.generic(self, f)
        stages = f.annotation("num_stages", 0) if f.kind == "pipelined" else 0
        if stages < 2:
            return f
        producers = _producers(f)
        if not producers:
            return f
        staged = {}
        for c in producers:
            b = c.dst.buffer
            if b in staged:
                continue
            nb = Buffer(b.name, (stages,) + tuple(b.shape), b.dtype, "shared", span=b.span)
            staged[b] = nb
            if b in self.swizzled and (b.numel // b.shape[-1]) % 8 == 0 and swizzle_ok(nb):
                self.swizzled.add(nb)
            if b in self.hopper:  # stages start on whole 8-row panels: rows per stage % 8 == 0
                if (b.numel // b.shape[-1]) % 8:
                    raise TilecraftError(f"{b.name}: wgmma operand tiles need a multiple of 8 rows", f.span)
                self.hopper.add(nb)
        self.allocs.update(staged)
        ko = f.var

        def issue(it):
            cps = []
            for c in producers:
                src = substitute(c.src, {ko: it})
                dst = _Restage(staged, binary("%", it, stages)).visit(Region.whole(c.dst.buffer))
                cps.append(Copy(src, dst, "async", span=c.span))
            return seq(*cps)
        rest = [s for s in (f.body.stmts if isinstance(f.body, Seq) else (f.body,)) if s not in producers]
        compute = _Restage(staged, binary("%", ko, stages)).visit(seq(*rest))
        loop = _Loop(f, stages, issue, rest, compute, producers, staged)
        form = self._form(rest, producers)
        self.notes.append(f"{where(f.span)}: T.Pipelined, {stages} stages, "
                          f"{_FORM_NOTES[form]}{self._tma_refusal(form, producers)}")
        return getattr(self, f"_{form}")(loop)

    # ---- the loop forms (module docstring) ------------------------------------------------------
    def _form(self, rest, producers) -> str:
        g = rest[0] if len(rest) == 1 and isinstance(rest[0], Gemm) else None
        plan = self.plans.get(g) if g is not None else None
        if self.wgmma_async and isinstance(plan, tuple) and plan[0] == "wgmma":
            if self.use_tma and all(self._tma_plan(c) is not None for c in producers):
                return "wgmma_tma"
            return "wgmma_async"
        mma_ss = (isinstance(plan, tuple) and len(plan) == 2 and all(isinstance(x, int) for x in plan)
                  and g.a.buffer.scope == "shared" and g.b.buffer.scope == "shared")
        if mma_ss:
            return "mbarrier" if self.use_mbarrier else "barrier_in_gemm"
        return "plain"

    def _plain(self, lp):
        body = seq(lp.wait, Sync(), lp.issue_next(), _call("tc::cp_async_commit"), lp.compute)
        return seq(*lp.prologue(), lp.loop(body), _call("tc::cp_async_wait_all"), Sync())

    def _barrier_in_gemm(self, lp):
        g = lp.gemm(pipeline_hook=Call(f"tc::PipelineBarrier<{lp.stages - 2}>", (), dt.int32))
        body = seq(lp.issue_next(), _call("tc::cp_async_commit"), g)
        return seq(*lp.prologue(), lp.wait, Sync(), lp.loop(body), _call("tc::cp_async_wait_all"), Sync())

    def _mbarrier(self, lp):
        S = lp.stages
        bar = Buffer("pipe_bar", (2 * S,), dt.uint64, "shared", span=lp.f.span)
        ref = Ref(bar, (const(0),))
        g = lp.gemm(pipeline_hook=Call(f"tc::PipeRelease<{S}>", (ref, lp.ko), dt.int32))
        head = [Alloc(bar), _call(f"tc::pipe_init<{S}>", ref, const(self.threads)), Sync()]
        body = seq(lp.issue_next(_call(f"tc::pipe_acquire<{S}>", ref, lp.nxt),
                                 _call(f"tc::pipe_commit<{S}>", ref, lp.nxt)),
                   _call(f"tc::pipe_wait<{S}>", ref, lp.ko), g)
        return seq(*head, *lp.prologue(lambda t: _call(f"tc::pipe_commit<{S}>", ref, t)), lp.loop(body),
                   _call("tc::cp_async_wait_all"), Sync(), _call(f"tc::pipe_inval<{S}>", ref), Sync())

    def _wgmma_async(self, lp):
        g = lp.gemm(async_groups=1)
        body = seq(lp.wait, g, Sync(), lp.issue_next(), _call("tc::cp_async_commit"))
        return seq(*lp.prologue(), self._drained(lp, body, g), _call("tc::cp_async_wait_all"), Sync())

    def _drained(self, lp, body, g):
        """The loop, then the wait for its last wgmma group.  A loop that may run zero times would
        reach the drain with accumulators no wgmma wrote, and ptxas then serialises every wgmma
        in the loop (C7515): such a loop and its drain go under `if (n > 0)`."""
        drain = _call(f"tc::wgmma_drain<{self.layouts[g.c.buffer].num_regs}>", Ref(g.c.buffer, (const(0),)))
        main = seq(lp.loop(body), drain)
        return main if _static_ge(lp.n, 1) else If(binary("<", const(0), lp.n), main)

    def _tma_refusal(self, form, producers) -> str:
        """Why a loop asked to use TMA does not (for the plan notes)."""
        if not self.use_tma or form == "wgmma_tma":
            return ""
        if form != "wgmma_async":
            return "; tc.use_tma: only the asynchronous wgmma loop (tc.use_wgmma + tc.wgmma_async) loads by TMA"
        bad = [c.src.buffer.name for c in producers if self._tma_plan(c) is None]
        return (f"; tc.use_tma: {', '.join(bad)} cannot be loaded by TMA (a whole tile of a 2-D tensor with a "
                f"static shape, rows a multiple of 16 bytes and no type change is needed)")

    def _tma_plan(self, c: Copy):
        """(swizzle, boxes) filling c's shared tile from its 2-D tensor by TMA, or None."""
        src, b, d = c.src, c.src.buffer, c.dst.buffer
        if (b.ndim != 2 or d.ndim != 2 or not all(isinstance(x, int) for x in b.shape) or d not in self.hopper
                or b.dtype != d.dtype or b.dtype.bytes not in (2, 4) or (b.shape[1] * b.dtype.bytes) % 16
                or tuple(src.extents) != tuple(d.shape)):
            return None
        try:
            return sm90_tile_boxes(d.shape[0], d.shape[1], d.dtype.bytes)
        except ValueError:
            return None

    def _wgmma_tma(self, lp):
        S, ko = lp.stages, lp.ko
        bar = Buffer("tma_bar", (S,), dt.uint64, "shared", span=lp.f.span)
        tid0 = binary("==", thread_index(), 0)
        loads = []
        for c in lp.producers:
            swizzle, boxes = self._tma_plan(c)
            desc = BuiltinVar(f"tc_tma_{len(self.tma_descs)}")  # the kernel's pointer to its tensor map (codegen)
            self.tma_descs.append((c.src.buffer, (boxes[0][3], boxes[0][4]), swizzle))
            loads.append((c, boxes, desc))
        nbytes = sum(c.dst.buffer.nbytes for c in lp.producers)

        def issue(t):
            stage = binary("%", t, S)
            full = Ref(bar, (stage,))
            calls = [_call("tc::tma_expect", full, const(nbytes))]
            for c, boxes, desc in loads:
                row0, col0 = substitute(c.src, {ko: t}).starts
                base = Ref(lp.staged[c.dst.buffer], (stage, const(0), const(0)))
                calls += [_call("tc::tma_load_tile", base, const(off), desc, full, binary("+", col0, c0),
                                binary("+", row0, r0)) for off, r0, c0, _, _ in boxes]
            return If(tid0, seq(*calls))
        g = lp.gemm(async_groups=1, tma_fed=True)
        wait = _call("tc::mbar_wait_parity", Ref(bar, (binary("%", ko, S),)), binary("%", binary("//", ko, S), 2))
        body = seq(wait, g, Sync(), If(binary("<", lp.nxt, lp.n), issue(lp.nxt)))
        bars = [Ref(bar, (const(s),)) for s in range(S)]
        head = [Alloc(bar), If(tid0, seq(*[_call("tc::mbar_init", r, const(1)) for r in bars])), Sync()]
        prologue = [issue(const(s)) if _static_ge(lp.n, s + 1) else If(binary("<", const(s), lp.n), issue(const(s)))
                    for s in range(S - 1)]
        tail = [Sync(), If(tid0, seq(*[_call("tc::mbar_inval", r) for r in bars])), Sync()]
        return seq(*head, *prologue, self._drained(lp, body, g), *tail)

    def visit_Alloc(self, a):
        return a


_FORM_NOTES = {
    "plain": "cp.async copies issued a tile ahead, wait + barrier per iteration",
    "barrier_in_gemm": "cp.async copies issued a tile ahead, wait + barrier inside the mma.sync gemm",
    "mbarrier": "cp.async copies on per-stage mbarriers",
    "wgmma_async": "cp.async copies, one wgmma group kept in flight",
    "wgmma_tma": "TMA tile loads on per-stage mbarriers, one wgmma group kept in flight",
}


class _Loop:
    """One T.Pipelined loop being rewritten: its parts and the pieces every form is built from."""

    def __init__(self, f: For, stages: int, issue, rest, compute, producers, staged):
        self.f, self.stages, self.issue, self.rest, self.compute = f, stages, issue, rest, compute
        self.producers, self.staged = producers, staged  # the copies, and old tile -> staged tile
        self.n, self.ko = f.extent, f.var
        self.nxt = binary("+", self.ko, stages - 1)
        self.wait = _call(f"tc::cp_async_wait<{stages - 2}>")

    def prologue(self, close=None) -> list:
        """Copies of tiles 0 .. S-2 (those past the loop's extent skipped).  Each is followed by a
        commit, even when skipped (the waits count S-1 groups, empty ones included), or, with
        `close`, by `close(tile)` only when the tile exists (an mbarrier arrival)."""
        out = []
        for s in range(self.stages - 1):
            tile = self.issue(const(s)) if close is None else seq(self.issue(const(s)), close(const(s)))
            out.append(tile if _static_ge(self.n, s + 1) else If(binary("<", const(s), self.n), tile))
            if close is None:
                out.append(_call("tc::cp_async_commit"))
        return out

    def issue_next(self, before=None, after=None):
        """Copies of tile ko+S-1 when it exists (optionally wrapped in `before` / `after`)."""
        return If(binary("<", self.nxt, self.n), seq(before, self.issue(self.nxt), after))

    def gemm(self, **fields):
        """The loop's gemm (on stage ko) with `fields` set; plans follow the rebuilt node."""
        g = replace(self.compute, **fields)
        _Restage.renamed[self.rest[0]] = g
        return g

    def loop(self, body) -> For:
        f = self.f
        return For(self.ko, f.start, self.n, "serial", body, f.step, (), span=f.span)


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
    swizzled = set(func.attr("swizzled", set()))
    hopper = set(func.attr("swizzled_sm90", set()))
    _Restage.renamed = {}
    p = _Pipeline(swizzled, hopper, func.attr("gemm_plans", {}), func.attr("fragment_layouts", {}),
                  options_of(func))
    body = p.visit(func.body)
    if not p.allocs:
        return func.with_attr("plan_notes", list(func.attr("plan_notes", [])) + p.notes)
    body = _ReplaceAllocs(p.allocs).visit(body)
    # the gemms now read stage slices: move their plans over to the rebuilt gemm nodes
    plans = dict(func.attr("gemm_plans", {}))
    for old, new in _Restage.renamed.items():
        if old in plans:
            plans[new] = plans[old]
    out = (func.with_body(body).with_attr("swizzled", swizzled).with_attr("swizzled_sm90", hopper)
           .with_attr("gemm_plans", plans).with_attr("plan_notes", list(func.attr("plan_notes", [])) + p.notes))
    if p.tma_descs:
        index = {id(b): i for i, b in enumerate(func.params)}
        out = out.with_attr("tma_descs", [{"param": index[id(b)], "box": list(box), "swizzle": sw}
                                          for b, box, sw in p.tma_descs])
    return out

"""The pieces every pipelined loop form is built from: the loop's parts (`LoopParts`: its producer
copies, staged tiles, prologue and refills), pointing tile uses at a stage (`Restage`), and the TMA
loads, waits and drains the TMA forms share."""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from ...ir import (Alloc, Copy, For, If, Let, Load, Mutator, Ref, Region, Seq, Stmt, Store, Sync, Var,
                   binary, collect, const, seq, stmts_of, substitute, dtype as dt)
from ...ir import Buffer
from ...ir import intrinsics as I
from ...ir.expr import BuiltinVar, Const, thread_index
from ...ir.lowering import WgmmaPlan, WgmmaRSPlan

call = I.evaluate


class Restage(Mutator):
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


def body_stmts(loop: For) -> tuple:
    return loop.body.stmts if isinstance(loop.body, Seq) else (loop.body,)


def producers(loop: For) -> list:
    """The loop's producer copies: whole shared tiles filled from global memory at indices that
    depend on nothing computed inside the loop, and used in the loop only through regions, loads
    and stores (what `Restage` points at a stage; a tile op that takes the whole tile as a buffer,
    such as T.reduce or T.cumsum, cannot be, so that tile's copy stays synchronous)."""
    local_vars = {s.var for s in collect(loop.body, lambda n: isinstance(n, Let))}
    whole = _whole_tile_operands(loop.body)
    out = []
    for s in body_stmts(loop):
        if (isinstance(s, Copy) and s.src.buffer.scope == "global" and s.dst.buffer.scope == "shared"
                and s.dst.covers_whole() and s.dst.buffer not in whole):
            used = collect(s.src, lambda n: isinstance(n, (Var, Load)))
            if any((isinstance(u, Load) and not _invariant_var_load(u, loop)) or u in local_vars for u in used):
                continue
            out.append(s)
    return out


def _invariant_var_load(e: Load, loop: For) -> bool:
    """Whether `e` reads a `T.alloc_var` scalar that nothing in `loop` writes (a group index found
    before the loop, say): its value is the same in every iteration, so a copy indexed by it may be
    issued ahead like any other."""
    if e.buffer.scope != "var" or not all(isinstance(i, Const) for i in e.indices):
        return False
    b = e.buffer
    return not collect(loop.body, lambda n: (isinstance(n, (Store, Region)) and n.buffer is b) or (
        is_dataclass(n) and not isinstance(n, (Load, Store, Region, Buffer))
        and any(getattr(n, f.name) is b for f in fields(n))))


def _whole_tile_operands(body) -> set:
    """Buffers some statement under `body` names directly (a field holding the Buffer itself), not
    through a Region, Load, Store or its Alloc."""
    out = set()
    for n in collect(body, lambda n: is_dataclass(n) and not isinstance(n, (Region, Load, Store, Alloc, Buffer))):
        for f in fields(n):
            v = getattr(n, f.name)
            if isinstance(v, Buffer):
                out.add(v)
    return out


def static_ge(n, k) -> bool:
    return isinstance(n, Const) and n.value >= k


class LoopParts:
    """One T.Pipelined loop being rewritten: its parts and the pieces every form is built from."""

    def __init__(self, f: For, stages: int, issue, rest, compute, producers, staged):
        self.f, self.stages, self.issue, self.rest, self.compute = f, stages, issue, rest, compute
        self.producers, self.staged = producers, staged  # the copies, and old tile -> staged tile
        self.n, self.ko = f.extent, f.var
        self.nxt = binary("+", self.ko, stages - 1)
        self.wait = call(I.CpAsyncWait(stages - 2))

    def prologue(self, close=None) -> list:
        """Copies of tiles 0 .. S-2 (those past the loop's extent skipped).  Each is followed by a
        commit, even when skipped (the waits count S-1 groups, empty ones included), or, with
        `close`, by `close(tile)` only when the tile exists (an mbarrier arrival)."""
        out = []
        for s in range(self.stages - 1):
            tile = self.issue(const(s)) if close is None else seq(self.issue(const(s)), close(const(s)))
            out.append(tile if static_ge(self.n, s + 1) else If(binary("<", const(s), self.n), tile))
            if close is None:
                out.append(call(I.CpAsyncCommit()))
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


def drained(ctx, lp: LoopParts, body, g, unroll: int = 0):
    """The loop, then the wait for its last wgmma group.  A loop that may run zero times would
    reach the drain with accumulators no wgmma wrote, and ptxas then serialises every wgmma
    in the loop (C7515): such a loop and its drain go under `if (n > 0)`."""
    drain = call(I.WgmmaDrain(ctx.layouts[g.c.buffer].num_regs), Ref(g.c.buffer, (const(0),)))
    main = seq(lp.loop(body, unroll), drain)
    return main if static_ge(lp.n, 1) else If(binary("<", const(0), lp.n), main)


def tma_loads(ctx, lp: LoopParts, plan_loads) -> list:
    """(copy, boxes, tensor-map var, row dim) per producer copy; each copy becomes a kernel parameter."""
    loads = []
    for c, load in zip(lp.producers, plan_loads):
        desc = BuiltinVar(f"tc_tma_{len(ctx.tma_descs)}")  # the kernel's pointer to its tensor map (codegen)
        box = [1] * c.src.buffer.ndim                        # the box, one size per tensor dim
        box[load.row_dim], box[-1] = load.boxes[0][3], load.boxes[0][4]
        if load.split:   # the last dim mapped as [n / split][split]: the row is one box of [cols / split][split]
            box[-1:] = [box[-1] // load.split, load.split]
        ctx.tma_descs.append((c.src.buffer, tuple(box), load.swizzle, load.split))  # as TmaDescriptor (pipeline_copies)
        loads.append((c, load.boxes, desc, load.row_dim, load.split))
    return loads


def tma_issue(lp: LoopParts, loads, bar, t, subst=None) -> Stmt:
    """Announce tile t's bytes on bar[t % S] and issue its boxes into stage t % S (one thread);
    the copies' sources with `subst` substituted (default: ko = t)."""
    stage = binary("%", t, lp.stages)
    full = Ref(bar, (stage,))
    nbytes = sum(c.dst.buffer.nbytes for c, *_ in loads)
    calls = [call(I.TmaExpect(), full, const(nbytes))]
    for c, boxes, desc, row_dim, split in loads:
        starts = substitute(c.src, {lp.ko: t} if subst is None else subst).starts
        base = Ref(lp.staged[c.dst.buffer], (stage,) + (const(0),) * c.dst.buffer.ndim)
        for off, r0, c0, _, _ in boxes:
            at = list(starts)
            at[row_dim], at[-1] = binary("+", at[row_dim], r0), binary("+", at[-1], c0)
            if split:   # a whole row from column 0 (plan_pipelines): piece 0, element 0 of the split dim
                at[-1:] = [const(0), const(0)]
            calls.append(call(I.TmaLoadTile(), base, const(off), desc, full, *reversed(at)))  # innermost first
    return seq(*calls)


def tma_loop(lp: LoopParts, loads, order, close):
    """The TMA loop on one ring of per-stage mbarriers: `order(wait, refill)` is an iteration,
    `close(body)` the loop around it."""
    S, ko = lp.stages, lp.ko
    bar = Buffer("tma_bar", (S,), dt.uint64, "shared", span=lp.f.span)
    tid0 = binary("==", thread_index(), 0)
    wait = call(I.MbarWaitParity(), Ref(bar, (binary("%", ko, S),)), binary("%", binary("//", ko, S), 2))
    body = order(wait, If(binary("<", lp.nxt, lp.n), If(tid0, tma_issue(lp, loads, bar, lp.nxt))))
    bars = [Ref(bar, (const(s),)) for s in range(S)]
    head = [Alloc(bar), If(tid0, seq(*[call(I.MbarInit(), r, const(1)) for r in bars])), Sync()]
    prologue = []
    for s in range(S - 1):
        tile = If(tid0, tma_issue(lp, loads, bar, const(s)))
        prologue.append(tile if static_ge(lp.n, s + 1) else If(binary("<", const(s), lp.n), tile))
    tail = [Sync(), If(tid0, seq(*[call(I.MbarInval(), r) for r in bars])), Sync()]
    return seq(*head, *prologue, close(body), *tail)


def fed(lp: LoopParts):
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


flat = stmts_of   # a statement as the flat list of its top-level statements (nested Seqs opened)

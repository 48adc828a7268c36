"""Rewrite every planned `T.Pipelined` loop as its plan says (CUDA targets with cp.async).

Before: plan_pipelines put a plan on each loop it pipelines (`For.plan`, ir/loop_plan.py).  After:
each shared tile such a loop's producer copies fill has S buffers (a leading stage dimension; a
staged tile keeps its swizzle, a wgmma tile's stages start on whole 8-row panels), the loop is the
form's statements (`transform/pipelining/<form>.py`, found by the plan's class), the kernel's TMA
descriptors are in the lowering state (`tma_descs`), a warp-specialized loop's kernel is split into
its producer and consumer roles, and a persistent kernel walks its tiles.  Statements around a
pipelined loop that use its tiles use one stage: the last iteration's after the loop, stage 0
before it.  Nothing is decided here: a loop without a plan is left as it is.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import TilecraftError
from ..ir import Alloc, Buffer, Copy, For, Kernel, Mutator, Region, Seq, binary, collect, const, seq, substitute
from ..ir.func import PrimFunc
from ..ir.loop_plan import Persistent
from ..ir.lowering import SWIZZLE_SM80, SWIZZLE_SM90, TmaDescriptor
from .pipelining import BuildCtx, build
from .pipelining.parts import LoopParts, Restage, body_stmts, producers
from .pipelining.persistent import placed_walk, walk_kernel
from .pipelining.warp_specialized import place_warp_specialized
from .plan_shared_layouts import swizzle_ok


class _Pipeline(Mutator):
    def __init__(self, smem_layouts: dict, layouts: dict):
        super().__init__()
        self.layouts = layouts
        self.smem_layouts = smem_layouts  # shared buffer -> swizzle kind; staged tiles are added
        self.ctx = None
        self.tma_descs: list = []  # (global buffer, box, swizzle, split) per kernel parameter
        self.allocs: dict = {}  # old shared buffer -> staged buffer
        self.finals: list = []  # per pipelined loop: (its old tile -> staged tile, the stage its last iteration used)

    def visit_Kernel(self, k: Kernel):
        self.ctx = BuildCtx(k.num_threads, self.layouts, self.tma_descs)
        walked = [f for f in collect(k.body, lambda n: isinstance(n, For) and isinstance(n.plan, Persistent))]
        walk = walked[0].plan.walk if walked else None
        if walk is not None:
            k = walk_kernel(k, walk, walked[0])
        out = place_warp_specialized(Mutator.generic(self, k))
        return out if walk is None else placed_walk(out, walk, self.ctx.walk_before, self.ctx.walk_after)

    def visit_For(self, f: For):
        f = Mutator.generic(self, f)
        plan = f.plan
        if plan is None:
            return f
        stages = plan.stages
        prods = producers(f)
        staged = {}
        for c in prods:
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
            for c in prods:
                src = substitute(c.src, {ko: it})
                dst = Restage(staged, binary("%", it, stages)).visit(Region.whole(c.dst.buffer))
                cps.append(Copy(src, dst, "async", span=c.span))
            return seq(*cps)
        rest = [s for s in body_stmts(f) if s not in prods]
        # tiles allocated inside the loop body (TileLang scopes every allocation to the kernel) are
        # declared before the loop: the prologue already fills them
        hoisted = [s for s in rest if isinstance(s, Alloc) and s.buffer in staged]
        rest = [s for s in rest if s not in hoisted]
        stage = binary("%", plan.walk.count(ko) if isinstance(plan, Persistent) else ko, stages)
        compute = Restage(staged, stage).visit(seq(*rest))
        out = build(LoopParts(f, stages, issue, rest, compute, prods, staged), plan, self.ctx)
        return seq(*hoisted, out) if hoisted else out

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
                v = Restage(staged, stage).visit(v)
            after.extend(self.finals[n0:])
            marks.append(len(self.finals))
            out.append(v)
        for i in range(len(out)):
            for staged, _ in self.finals[marks[i]:marks[-1]]:   # loops in later statements
                out[i] = Restage(staged, const(0)).visit(out[i])
        return s if all(a is b for a, b in zip(out, s.stmts)) else replace(s, stmts=tuple(out))


class _ReplaceAllocs(Mutator):
    def __init__(self, allocs):
        super().__init__()
        self.allocs = allocs

    def visit_Alloc(self, a):
        nb = self.allocs.get(a.buffer)
        return a if nb is None else type(a)(nb, a.init, span=a.span)


def pipeline_copies(func: PrimFunc, ctx) -> PrimFunc:
    if not collect(func.body, lambda n: isinstance(n, For) and n.plan is not None):
        return func
    st = func.lowering
    p = _Pipeline(dict(st.smem_layouts), st.fragment_layouts)
    body = p.visit(func.body)
    if not p.allocs:
        return func.with_body(body)
    body = _ReplaceAllocs(p.allocs).visit(body)
    index = {id(b): i for i, b in enumerate(func.params)}
    descs = tuple(TmaDescriptor(index[id(b)], tuple(box), sw, b.name, split) for b, box, sw, split in p.tma_descs)
    smem_layouts = {b: k for b, k in p.smem_layouts.items() if b not in p.allocs}  # the staged tiles replace theirs
    return func.with_body(body).with_lowering(smem_layouts=smem_layouts, tma_descs=st.tma_descs + descs)

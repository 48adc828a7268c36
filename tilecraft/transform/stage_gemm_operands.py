"""Gemm operands in registers that the tensor cores cannot read there go through shared memory
(CUDA targets).

Before: gemms have plans (`infer_layouts`) and fragments have register layouts.  A fragment
operand is read from registers only when it is A, not transposed, on an mma.sync plan with warps
along M only and in exactly that plan's A layout (or A on the wgmma-from-registers path, whose
layout inference guarantees).  TileLang's programs also hand `T.gemm` fragments filled from
shared or global memory in other layouts, transposed A (`transpose_A=True`) or fragment B.
After: each such operand is written to a fresh shared tile of its shape right before the gemm,
which reads the tile instead:

    A_stage = shared (shape of A)
    T.copy(A_frag, A_stage)
    T.gemm(A_stage, B, C, ...)

the layout conversion TileLang performs through shared memory.  The gemm keeps its plan (an
mma.sync plan runs on shared A as well; the scalar fallback reads shared tiles too);
`plan_shared_layouts` then swizzles the tile for the gemm, `plan_shared_memory` places it and
`insert_syncs` puts the barrier between the copy and the gemm.

An operand that is an exact copy of a shared tile needs no tile of its own: where the same statement
list holds `T.copy(S, F)` (all of shared `S` into all of fragment `F`, one dtype, S without a layout
annotation) and, later, the gemm reading F, with nothing between the two writing S or F, the gemm
reads S itself.  This is TileLang's attention idiom `T.copy(acc_s, S_shared); T.copy(S_shared,
acc_s_cast); T.gemm(acc_s_cast, V_shared, ...)`: its staging tile would duplicate S_shared's bytes
(the shared memory a two-stage MLA decode loop needs to fit sm_90a's 227 KB).  The copy into F stays.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Alloc, Annotate, AnnotationKey, Buffer, Copy, Gemm, Load, Mutator, Region, collect, const, seq
from ..ir.tileop import TileOp
from ..ir.func import PrimFunc
from ..ir.lowering import Mma80Plan, WgmmaRSPlan
from ..ir.layout.fragment import mma_accumulator_layout
from .warp_groups import scope_threads


def reads_from_registers(g: Gemm, layouts: dict, threads: int) -> bool:
    """Whether the gemm's fragment A can be read straight from registers (cuda_ops/gemm.py)."""
    if isinstance(g.plan, WgmmaRSPlan):
        return True
    if not isinstance(g.plan, Mma80Plan) or g.trans_a or g.plan.warps_n != 1:
        return False
    m, _, k = g.mnk
    lay = layouts.get(g.a.buffer)
    return lay is not None and lay.equivalent(mma_accumulator_layout((m, k), threads, g.plan.warps_m, 1))


def _only_reads(stmt, bufs: set) -> bool:
    """Whether `stmt` mentions the buffers of `bufs` only as reads (loads, tile ops' read regions)."""
    mentions = collect(stmt, lambda n: isinstance(n, Buffer) and n in bufs)
    if not mentions:
        return True
    reads = sum(1 for n in collect(stmt, lambda n: isinstance(n, Load) and n.buffer in bufs))
    for op in collect(stmt, lambda n: isinstance(n, TileOp)):
        reads += sum(1 for r in op.reads() if r.buffer in bufs)
    return reads == len(mentions)


def _forwards(stmts, annotated: set) -> dict:
    """id(gemm) -> {fragment: shared tile} for the gemms of one statement list whose fragment operand
    is an unchanged copy of a whole shared tile (module docstring)."""
    out = {}
    for i, c in enumerate(stmts):
        if not (isinstance(c, Copy) and c.mode == "sync" and c.src.buffer.scope == "shared"
                and c.dst.buffer.scope == "fragment" and c.src.covers_whole() and c.dst.covers_whole()
                and c.src.buffer.dtype == c.dst.buffer.dtype
                and tuple(c.src.buffer.shape) == tuple(c.dst.buffer.shape)
                and c.src.buffer not in annotated and c.src.buffer is not c.dst.buffer):
            continue
        pair = {c.src.buffer, c.dst.buffer}
        for s in stmts[i + 1:]:
            if isinstance(s, Gemm) and c.dst.buffer in (s.a.buffer, s.b.buffer) and c.src.buffer not in \
                    (s.a.buffer, s.b.buffer, s.c.buffer) and s.c.buffer is not c.dst.buffer:
                out.setdefault(id(s), {})[c.dst.buffer] = c.src.buffer
            if not _only_reads(s, pair):
                break
    return out


class _Stage(Mutator):
    def __init__(self, layouts: dict, annotated: set):
        super().__init__()
        self.layouts = layouts
        self.annotated = annotated
        self.threads = 0
        self.forward = {}

    def visit_Seq(self, s):
        self.forward.update(_forwards(s.stmts, self.annotated))
        return Mutator.generic(self, s)

    def visit_Kernel(self, k):
        outer, self.threads = self.threads, k.num_threads
        try:
            return Mutator.generic(self, k)
        finally:
            self.threads = outer

    def visit_WarpGroupScope(self, s):
        """A `T.ws` branch: its gemms run on its own threads (transform/warp_groups/)."""
        outer, self.threads = self.threads, scope_threads(s, self.threads)
        try:
            return Mutator.generic(self, s)
        finally:
            self.threads = outer

    def visit_Gemm(self, g: Gemm):
        pre, a, b = [], g.a, g.b
        if a.buffer.scope == "fragment" and a.covers_whole() and not reads_from_registers(g, self.layouts,
                                                                                         self.threads):
            a = self._stage(a, pre, g)
        if b.buffer.scope == "fragment" and b.covers_whole():
            b = self._stage(b, pre, g)
        if a is g.a and b is g.b:
            return g
        return seq(*pre, replace(g, a=a, b=b)) if pre else replace(g, a=a, b=b)

    def _stage(self, region: Region, pre: list, g: Gemm) -> Region:
        buf = region.buffer
        shared = self.forward.get(id(g), {}).get(buf)
        if shared is not None:                      # an unchanged copy of a shared tile: read that tile
            return Region.whole(shared)
        stage = Buffer(f"{buf.name}_smem", tuple(buf.shape), buf.dtype, "shared", span=g.span)
        tile = Region(stage, tuple(const(0) for _ in buf.shape), tuple(buf.shape), span=g.span)
        pre += [Alloc(stage, span=g.span), Copy(region, tile, span=g.span)]
        return tile


def stage_gemm_operands(func: PrimFunc, ctx) -> PrimFunc:
    layouts = func.lowering.fragment_layouts
    annotated = {b for a in collect(func.body, lambda n: isinstance(n, Annotate) and n.key == AnnotationKey.LAYOUT)
                 for b in a.value}
    return func.with_body(_Stage(layouts, annotated).visit(func.body))

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
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Alloc, Buffer, Copy, Gemm, Mutator, Region, const, seq
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


class _Stage(Mutator):
    def __init__(self, layouts: dict):
        super().__init__()
        self.layouts = layouts
        self.threads = 0

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
        if not pre:
            return g
        return seq(*pre, replace(g, a=a, b=b))

    def _stage(self, region: Region, pre: list, g: Gemm) -> Region:
        buf = region.buffer
        stage = Buffer(f"{buf.name}_smem", tuple(buf.shape), buf.dtype, "shared", span=g.span)
        tile = Region(stage, tuple(const(0) for _ in buf.shape), tuple(buf.shape), span=g.span)
        pre += [Alloc(stage, span=g.span), Copy(region, tile, span=g.span)]
        return tile


def stage_gemm_operands(func: PrimFunc, ctx) -> PrimFunc:
    layouts = func.lowering.fragment_layouts
    return func.with_body(_Stage(layouts).visit(func.body))

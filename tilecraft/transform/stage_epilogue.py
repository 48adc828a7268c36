"""Stage tensor-core accumulator stores to global memory through shared memory (CUDA targets).

Before: `T.copy(C_local, C[...])` where `C_local` is a gemm accumulator in the mma/wgmma register
layout.  In that layout a thread holds 2 adjacent columns of 8 different rows, so a direct store
is 4 bytes per thread and every warp store touches 8 rows with half-filled 32-byte sectors.
After:

    C_stage = shared (rows, cols + 8)        # 8 padding elements: the 8 rows a warp writes at
    T.copy(C_local, C_stage[:, :cols])       # once land on distinct banks
    T.copy(C_stage[:, :cols], C[...])        # 16-byte, fully coalesced stores

`plan_shared_memory` lets `C_stage` reuse the bytes of the main loop's tiles (dead by then) and
`insert_syncs` puts the barrier between the two copies.  Measured on the H200 (4096^3 fp16
GEMM): the direct epilogue costs ~8% of the kernel (benchmarks/gemm_anatomy.py).

Only top-level copies (not inside loops or ifs) are staged, and only when the kernel's shared
memory, counted without any reuse, still fits the architecture with the staging tile added, so
this pass never turns a kernel that compiled into one that does not.
`pass_configs={"tc.stage_epilogue": False}` turns it off.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Alloc, Buffer, Copy, For, Gemm, Kernel, Mutator, Region, Seq, collect, const, seq
from ..ir.func import PrimFunc
from .warp_groups import is_manual

PAD = 8  # elements: 16 bytes of fp16 / 32 bytes of fp32, 4 / 8 banks between consecutive rows


def _shared_bytes_without_reuse(k: Kernel) -> int:
    total = 0
    for a in collect(k.body, lambda n: isinstance(n, Alloc) and n.buffer.scope == "shared"):
        total += a.buffer.nbytes
    for f in collect(k.body, lambda n: isinstance(n, For) and n.kind == "pipelined"):
        stages = f.annotation("num_stages", 0)
        if stages >= 2:  # pipeline_copies gives each tile its copies fill `stages` buffers
            filled = {c.dst.buffer for c in collect(f.body, lambda n: isinstance(n, Copy))
                      if c.dst.buffer.scope == "shared"}
            total += sum(b.nbytes * (stages - 1) for b in filled)
    return total


class _Stage(Mutator):
    def __init__(self, accumulators: set, budget: int):
        super().__init__()
        self.accumulators, self.budget = accumulators, budget

    def visit_Kernel(self, k: Kernel):
        stmts = list(k.body.stmts) if isinstance(k.body, Seq) else [k.body]
        used = _shared_bytes_without_reuse(k)
        out, changed = [], False
        for s in stmts:
            staged = self._stage(s, used) if isinstance(s, Copy) else None
            if staged is None:
                out.append(s)
                continue
            alloc, first, second = staged
            used += alloc.buffer.nbytes
            out += [alloc, first, second]
            changed = True
        if not changed:
            return k
        return replace(k, body=seq(*out))

    def _stage(self, c: Copy, used: int):
        src, dst = c.src, c.dst
        if (src.buffer not in self.accumulators or not src.covers_whole() or dst.buffer.scope != "global"
                or src.buffer.ndim != 2 or dst.buffer.dtype.bytes not in (2, 4)):
            return None
        rows, cols = src.buffer.shape
        stage = Buffer(f"{src.buffer.name}_stage", (rows, cols + PAD), dst.buffer.dtype, "shared", span=c.span)
        if used + stage.nbytes > self.budget:
            return None
        tile = Region(stage, (const(0), const(0)), (rows, cols), span=c.span)
        return Alloc(stage), Copy(src, tile, span=c.span), Copy(tile, dst, span=c.span)


def stage_epilogue(func: PrimFunc, ctx) -> PrimFunc:
    if not ctx.options.stage_epilogue or is_manual(func.body):
        return func  # T.ws branches: their stores go out as written (an optimisation only)
    accumulators = {g.c.buffer for g in collect(func.body, lambda n: isinstance(n, Gemm)) if g.plan is not None}
    if not accumulators:
        return func
    return func.with_body(_Stage(accumulators, ctx.target.max_shared_memory).visit(func.body))

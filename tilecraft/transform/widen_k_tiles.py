"""Short k-tiles of a TMA + wgmma main loop become 128-byte ones (sm_90a).

The classic GEMM of the README pipelines k-tiles of 32 halves: 64-byte rows, so every stage is a
quarter-size TMA box pair feeding two k16 steps of wgmma, and the loop's per-stage costs (an
mbarrier wait, a block barrier, the next stage's TMA issue) come every 4 wgmmas.  On the H200 the
same tile with 64-half k-tiles runs 0.90x / 0.96x cuBLAS (4096^3 / 8192^3) where the 32-half one
runs 0.83x / 0.92x (benchmarks/results/2026-12-01_h200_s8_bench.md).

A `T.Pipelined` loop qualifies when its body is exactly two copies from global tensors into whole
shared tiles and one accumulating `T.gemm` of those tiles into a fragment (not clear_accum; nothing
else reads or writes the tiles), each copy's
k-offset is `ko * kt + c`, kt * element size divides 128 bytes, the trip count is a multiple of
the widening factor f = 128 / (kt * size) and the widened ring stays within 128 KB (and, with the
program's other shared tiles, within three quarters of the block's shared memory).  The loop then
runs trip / f iterations over tiles f times as deep: the same sums, each accumulator element adding
the same products in the same k order (a wgmma group steps through k16 slices in order either way),
and TMA's zero fill covers what a ragged K leaves out of range, as before.

A loop that will split as two blocks per SM (transform/pipelining/warp_specialized.py: one consumer warpgroup of 128
accumulator registers a thread) keeps its k-tiles: split, the 32-half k-tiles on a 4-stage ring ran
0.92-0.99x cuBLAS where the widened 64/3 ring ran 0.90x (the producer refills a stage as soon as its
warps release it; the block barrier the widening amortises is gone).

Off with `tc.widen_k_tiles: False`; the plan says when a loop was widened.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Alloc, For, Seq, collect
from ..ir.analysis import as_int, linear, simplify_int
from ..ir.buffer import Region
from ..ir.expr import Load, Ref, Var, binary, const
from ..ir.functor import Mutator, substitute
from ..ir.node import same_seq, where
from ..ir.stmt import Store
from ..ir.tileop import Copy, Gemm
from .warp_groups import is_manual
from ..ir.layout.tma import tma_tensor_ok
from .pipelining.parts import flat
from .pipelining.warp_specialized import shared_bytes_beside, two_block_ring

ROW_BYTES = 128           # one 128-byte swizzle row per k-tile row
MAX_RING_BYTES = 128 * 1024


def _k_dim(trans: bool, operand: str) -> int:
    """The k dimension of a gemm operand tile: A [M][K] (or [K][M] transposed), B [K][N] (or [N][K])."""
    return (0 if trans else 1) if operand == "a" else (1 if trans else 0)


def _uses(body, buf) -> list:
    return collect(body, lambda n: (isinstance(n, (Region, Load, Ref, Store)) and n.buffer is buf))


def _splits_two_blocks(loop: For, kernel, g, a, b, opts, params) -> bool:
    """Whether pipeline_copies will split this loop as two blocks per SM (pipelining.warp_specialized.two_block_ring),
    judged before the loop's tiles are staged: asked for, the kernel's first top-level pipelined loop, a
    block of one warpgroup in x, tiles of tensors TMA can map."""
    first = next((s for s in flat(kernel.body) if isinstance(s, For) and s.kind == "pipelined"), None) if kernel else None
    if (kernel is None or opts.warp_specialization not in ("auto", True)
            or opts.persistent_tiles is True or any(t != 1 for t in kernel.threads[1:]) or first is not loop):
        return False   # (one loop per kernel splits: the first)
    copies = [s for s in (loop.body.stmts if isinstance(loop.body, Seq) else (loop.body,)) if isinstance(s, Copy)]
    if not all(any(c.src.buffer is p for p in params) and tma_tensor_ok(c.src.buffer, c.dst.buffer) for c in copies):
        return False   # the loop will not load by TMA, so it will not split
    threads = kernel.num_threads
    accum_regs = g.c.buffer.numel * g.c.buffer.dtype.bytes // 4 // max(threads, 1)
    stages = loop.annotation("num_stages", 1) or 1
    return two_block_ring(threads, accum_regs, a.nbytes + b.nbytes, stages,
                          shared_bytes_beside(kernel.body, loop, {a, b})) > 0


def _widen(loop: For, kernel_body, smem_limit: int, kernel=None, opts=None, params=()):
    """(new loop, buffer map, note) or None when the loop does not qualify."""
    stmts = list(loop.body.stmts) if isinstance(loop.body, Seq) else [loop.body]
    gemms = [s for s in stmts if isinstance(s, Gemm)]
    copies = [s for s in stmts if isinstance(s, Copy)]
    if len(gemms) != 1 or len(copies) != 2 or len(stmts) != 3:
        return None
    g = gemms[0]
    if g.clear_accum or g.note or g.plan is not None or g.c.buffer.scope != "fragment":
        return None  # C = A_k B_k of the last tile only (clear_accum) would change with deeper tiles
    if g.c.buffer.dtype.bits < 32:
        return None  # a narrow accumulator is rounded once per T.gemm call: deeper tiles would round less often
    a, b = g.a.buffer, g.b.buffer
    if (a.scope != "shared" or b.scope != "shared" or a is b or not g.a.covers_whole() or not g.b.covers_whole()
            or a.ndim != 2 or b.ndim != 2 or a.dtype is not b.dtype):
        return None
    kdim = {a: _k_dim(g.trans_a, "a"), b: _k_dim(g.trans_b, "b")}
    kt = a.shape[kdim[a]]
    if b.shape[kdim[b]] != kt or not isinstance(kt, int):
        return None
    row = kt * a.dtype.bytes
    if row >= ROW_BYTES or ROW_BYTES % row:
        return None
    if opts is not None and _splits_two_blocks(loop, kernel, g, a, b, opts, params):
        return None
    f = ROW_BYTES // row
    n, start = as_int(loop.extent), as_int(loop.start)
    if n is None or start != 0 or loop.step != 1 or n % f or n < f:
        return None
    stages = loop.annotation("num_stages", 1) or 1
    ring = stages * (a.numel + b.numel) * f * a.dtype.bytes
    others = sum(n.buffer.nbytes for n in collect(kernel_body, lambda n: isinstance(n, Alloc))
                 if n.buffer.scope == "shared" and n.buffer not in (a, b) and n.buffer.is_static)
    if ring > MAX_RING_BYTES or ring + others > smem_limit * 3 // 4:
        return None  # the program's other shared tiles leave the deeper ring no room
    if any(x is loop.var for x in collect(g, lambda m: isinstance(m, Var))):
        return None
    by_dst = {c.dst.buffer: c for c in copies}
    if set(by_dst) != {a, b}:
        return None
    new_copies = {}
    new_buf = {t: replace(t, shape=tuple(s * f if d == kdim[t] else s for d, s in enumerate(t.shape)))
               for t in (a, b)}
    for t, c in by_dst.items():
        src = c.src
        if (not c.dst.covers_whole() or src.buffer.scope != "global" or len(src.extents) != 2
                or not same_seq(src.extents, t.shape) or c.mode != "sync"):
            return None
        d = kdim[t]
        lin = linear(src.starts[d])
        if lin is None or lin[1].get(loop.var) != kt:
            return None
        others = [atom for atom in lin[1] if atom is not loop.var]
        if any(x is loop.var for atom in others for x in collect(atom, lambda m: isinstance(m, Var))):
            return None
        if any(x is loop.var for i, s in enumerate(src.starts) if i != d
               for x in collect(s, lambda m: isinstance(m, Var))):
            return None
        starts = tuple(simplify_int(substitute(s, {loop.var: binary("*", loop.var, f)})) if i == d else s
                       for i, s in enumerate(src.starts))
        extents = tuple(e * f if i == d else e for i, e in enumerate(src.extents))
        new_copies[c] = replace(c, src=Region(src.buffer, starts, extents), dst=Region.whole(new_buf[t]))
    # the tiles are the loop's alone: allocated, filled by its copies, read by its gemm
    for t in (a, b):
        inside = len(_uses(loop.body, t))
        if len(_uses(kernel_body, t)) != inside:
            return None
    body = []
    for s in stmts:
        if s in new_copies:
            body.append(new_copies[s])
        else:
            body.append(replace(g, a=Region.whole(new_buf[a]), b=Region.whole(new_buf[b])))
    new_loop = replace(loop, extent=const(n // f, loop.extent.dtype), body=Seq(tuple(body)))
    note = (f"{where(loop.span)}: T.Pipelined: k-tiles of {kt} widened to {kt * f} ({ROW_BYTES}-byte rows for "
            f"TMA and wgmma), {n // f} iterations instead of {n} (tc.widen_k_tiles)")
    return new_loop, {a: new_buf[a], b: new_buf[b]}, note


class _Loops(Mutator):
    def __init__(self, kernel_body, smem_limit: int, opts, params):
        super().__init__()
        self.kernel_body, self.smem_limit, self.opts, self.params = kernel_body, smem_limit, opts, params
        self.kernel = None
        self.buffers: dict = {}
        self.notes: list = []

    def visit_Kernel(self, k):
        outer, self.kernel = self.kernel, k
        try:
            return Mutator.generic(self, k)
        finally:
            self.kernel = outer

    def visit_For(self, s):
        if s.kind == "pipelined":
            got = _widen(s, self.kernel_body, self.smem_limit, self.kernel, self.opts, self.params)
            if got is not None:
                loop, buffers, note = got
                self.buffers.update(buffers)
                self.notes.append(note)
                return loop
        return Mutator.generic(self, s)


def widen_k_tiles(func, ctx):
    opts = ctx.options
    if not (ctx.target.has("wgmma") and opts.wgmma and opts.wgmma_async and opts.tma and opts.widen_k_tiles) or is_manual(func.body):
        return func
    loops = _Loops(func.body, ctx.target.max_shared_memory, opts, tuple(func.params))
    body = loops.visit(func.body)
    if not loops.buffers:
        return func
    body = Mutator(buffer_map=loops.buffers).visit(body)  # the allocations take the widened shapes
    return func.with_body(body).with_lowering(plan_notes=func.lowering.plan_notes + tuple(loops.notes))

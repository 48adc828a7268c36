"""One tile GEMM for a whole k-loop that only stages its operands (CPU target).

Before: a serial or pipelined loop whose body is exactly

    for ko in T.Pipelined(n):                       # or range / T.serial
        T.copy(A[.., k0 + ko*bk : k0 + (ko+1)*bk], A_s)
        T.copy(B[k0 + ko*bk : k0 + (ko+1)*bk, ..], B_s)
        T.gemm(A_s, B_s, C)

After: `if (A's and B's whole k range lie inside them): T.gemm(A[.., k0 : k0 + n*bk], B[k0 : .., ..], C)`
with the loop, unchanged, as the `else` (a ragged edge reads zeros there).  The fused gemm reads the
global tensors in place (lower_tile_ops_cpu.py gives it the micro-kernel with their row-major strides).

Why: on the CPU the per-iteration form stages bk columns of A and rows of B through the shared tiles and
reads and writes the whole float32 C once per iteration: at bk = 32 a bf16 GEMM on AMX spends more time
moving C than multiplying (1024^3 in 128 x 128 x 32 tiles, session 32: AMX runs 32 k a C tile and call
against 4 KB of C read and written).  One call over n*bk keeps each C tile in the tiles for all of k.

Same bits: a gemm's reference semantics (lower_tile_ops_cpu.py) sums each C element's products in
k order, one float32 FMA after another, C kept in float32 between calls; for bf16 x bf16 in blocks of
32 k, each block added to C once (tilecraft_cpu_gemm_bf16.h).  Both compose: calls over consecutive k
ranges are one call over their union -- for bf16 when bk is a multiple of 32, so that the blocks are the
same.  So the pass fuses only where the accumulator is float32 (C's own type: a 16-bit C is rounded
once per call), the copies are plain (same dtype, the whole tile), the staged tiles are used nowhere
else (their last contents are not read after the loop), C is not cleared per call, and the fused gemm
will be a micro-kernel call (strided operands of static shape).  tests/cpu/test_fuse_gemm_k_loops.py
checks fused against unfused bit for bit.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import (Alloc, Buffer, Copy, For, Gemm, If, Kernel, Mutator, Region, Var, View,
                  binary, collect, const, stmts_of, substitute)
from ..ir import dtype as dt
from ..ir.analysis import INF, as_int, bounds, linear
from ..ir.func import PrimFunc
from .lower_tile_ops_cpu import micro_kernel_operand

BF16_BLOCK = 32  # k a block of the bf16 x bf16 order (tilecraft_cpu_gemm_bf16.h)


class _Fuse(Mutator):
    def __init__(self, func: PrimFunc):
        super().__init__()
        self.env = {}
        body = func.body
        self.viewed = set()
        for v in collect(body, lambda n: isinstance(n, View)):
            self.viewed.update(id(b) for b in (v.buffer, v.base) if isinstance(b, Buffer))
        # how often each on-chip buffer is named in the whole function, and by its Allocs (a layout request,
        # T.annotate_layout, names it as a dict key, which `collect` does not visit: it does not count)
        self.uses: dict = {}
        for b in collect(body, lambda n: isinstance(n, Buffer)):
            self.uses[id(b)] = self.uses.get(id(b), 0) + 1
        self.allocs: dict = {}
        for a in collect(body, lambda n: isinstance(n, Alloc)):
            self.allocs[id(a.buffer)] = self.allocs.get(id(a.buffer), 0) + 1

    def visit_Kernel(self, k: Kernel):
        for v, g in zip(k.block_vars, k.grid):
            self.env[v] = (0, bounds(g, self.env)[1] - 1)
        return Mutator.generic(self, k)

    def visit_For(self, f: For):
        lo, hi = bounds(f.start, self.env)
        self.env[f.var] = (lo, hi + bounds(f.extent, self.env)[1] - 1)
        f = Mutator.generic(self, f)
        fused = self._fuse(f)
        return f if fused is None else fused

    # ---- the pattern ------------------------------------------------------------------------------
    def _fuse(self, f: For):
        n = as_int(f.extent)
        if f.kind not in ("serial", "pipelined") or f.step != 1 or n is None:
            return None
        body = stmts_of(f.body)
        if n < 1 or len(body) != 3 or not isinstance(body[2], Gemm) or \
                not all(isinstance(s, Copy) for s in body[:2]):
            return None
        g: Gemm = body[2]
        staged = {id(c.dst.buffer): c for c in body[:2]}
        ca, cb = staged.get(id(g.a.buffer)), staged.get(id(g.b.buffer))
        if ca is None or cb is None or ca is cb or g.clear_accum:
            return None
        if g.c.buffer.dtype != dt.float32:   # a 16-bit C is rounded once per call: calls do not compose
            return None
        if not (micro_kernel_operand(ca.src.buffer.dtype) and micro_kernel_operand(cb.src.buffer.dtype)):
            return None
        bf16 = ca.src.buffer.dtype == dt.bfloat16 and cb.src.buffer.dtype == dt.bfloat16
        k_tile = g.mnk[2]
        if bf16 and n > 1 and k_tile % BF16_BLOCK:
            return None   # the blocks of 32 k would straddle the calls
        per = _per_call(n, k_tile, bf16)
        kc = Var(f"{f.var.name}_chunk") if per < n else None
        a = self._fused_operand(ca, g.a, 0 if g.trans_a else 1, f, n, per, kc)
        b = self._fused_operand(cb, g.b, 1 if g.trans_b else 0, f, n, per, kc)
        if a is None or b is None:
            return None
        region_a, cond_a = a
        region_b, cond_b = b
        fused = replace(g, a=region_a, b=region_b)
        if kc is not None:
            fused = For(kc, const(0), const(n // per), "serial", fused, span=f.span)
        cond = cond_a if cond_b is None else cond_b if cond_a is None else binary("and", cond_a, cond_b)
        return fused if cond is None else If(cond, fused, f, span=f.span)

    def _fused_operand(self, copy: Copy, operand: Region, k_dim: int, f: For, n: int, per: int, kc):
        """(the global region a fused gemm reads instead of `operand`: `per` iterations' k tiles from the
        kc-th chunk's (all n when kc is None), the condition that all n lie inside the tensor or None when
        provably so); None where the copy is not a plain staging of consecutive k tiles into a tile used
        nowhere else, or where the chunks' first elements may lie outside."""
        src, dst = copy.src, copy.dst
        staged = dst.buffer
        if src.buffer.scope != "global" or src.buffer.dtype != staged.dtype or id(staged) in self.viewed \
                or id(src.buffer) in self.viewed:
            return None
        if not dst.covers_whole() or not operand.covers_whole() or len(staged.shape) != 2:
            return None
        if not all(isinstance(s, int) for s in src.buffer.shape):
            return None
        # the staged tile is named by its Alloc, this copy and the gemm only
        if self.uses.get(id(staged), 0) - self.allocs.get(id(staged), 0) != len(collect(f, lambda x: x is staged)):
            return None
        # the source's non-unit dims, in order, are the tile's dims
        dims = [d for d, e in enumerate(src.extents) if e != 1]
        if len(dims) != 2 or tuple(src.extents[d] for d in dims) != tuple(staged.shape):
            return None
        kd = dims[k_dim]
        bk = src.extents[kd]
        starts = list(src.starts)
        for d, s in enumerate(starts):
            lin = linear(s)
            if lin is None:
                return None
            coef = lin[1].get(f.var, 0)
            if d == kd:
                if coef != bk:   # consecutive tiles, ascending
                    return None
                if any(collect(t, lambda x: x is f.var) for t in lin[1] if t is not f.var):
                    return None
            elif coef or collect(s, lambda x: x is f.var):
                return None
        starts[kd] = substitute(starts[kd], {f.var: f.start})
        extents = list(src.extents)
        extents[kd] = bk * n
        cond = None
        for d, (s, e, size) in enumerate(zip(starts, extents, src.buffer.shape)):
            lo, hi = bounds(s, self.env)
            last = hi + (e - bk * per if d == kd else 0)   # the last chunk's first element
            if lo < 0 or hi == INF or last >= size or lo + e > size:
                return None   # a chunk may start outside, or the whole range never fits: the loop stands
            if hi + e > size:
                c = binary("<=", binary("+", s, const(e)), const(size))
                cond = c if cond is None else binary("and", cond, c)
        if kc is not None:
            starts[kd] = binary("+", starts[kd], binary("*", kc, const(bk * per)))
        extents[kd] = bk * per
        return Region(src.buffer, tuple(starts), tuple(extents)), cond


# k a fused call covers at most: the float32 micro-kernel converts its operands into float32 panels per call,
# which must stay in L2 (512 x 512 x 8192, one thread, session 32: float16 48 ms as the loop of 32-k calls, 58
# in one call, 42-43 in calls of 512 k (256: 45-48, 1024: 43-44); float32 48 / 50 / 39).  The bf16 path packs
# into AMX tiles and keeps them for the launch: best in one call (12 ms, the loop 25).
MAX_K_PER_CALL = 512


def _per_call(n: int, k_tile: int, bf16: bool) -> int:
    """Iterations a fused call covers: all n for bf16, else the most that divide n within MAX_K_PER_CALL k (one
    at least)."""
    if bf16:
        return n
    best = 1
    for c in range(1, n + 1):
        if n % c == 0 and c * k_tile <= MAX_K_PER_CALL:
            best = c
    return best


def fuse_gemm_k_loops_cpu(func: PrimFunc, ctx) -> PrimFunc:
    return func.with_body(_Fuse(func).visit(func.body))

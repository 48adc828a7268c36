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

The guarded element store that ends TileLang's grouped-GEMM and MoE programs is staged too:

    for i, j in T.Parallel(BM, BN):          for i, j in T.Parallel(BM, BN):  (or T.copy when the value
        if i < rows:                   ->        C_stage[i, j] = value        is the accumulator's element)
            C[r + i, c + j] = value          if <the guard holds at i = BM-1, j = BN-1>:   # the whole tile
                                                 T.copy(C_stage[:, :BN], C[r, c])          # 16-byte stores
                                             else:
                                                 for i, j in T.Parallel(BM, BN):
                                                     if i < rows: C[r + i, c + j] = C_stage[i, j]

It is taken when the guard is a conjunction of comparisons `e < X` / `e <= X` (or `X > e`, `X >= e`)
with `e` the loop index i or j plus terms free of both (so a tile that passes at its last row and
column passes everywhere), the store is `C[r + i, c + j]` with `r`, `c` free of i and j, and the value
reads an accumulator at [i, j]; the guard stays on the staging store when the value reads global
memory (a per-row weight past the tensor's end must not be read).  A grouped GEMM's full tiles
then leave as whole-tile copies and only each group's last tile stores element by element: 1.16x /
1.09x / 1.17x on the H200 for 8 / 64 / 16 groups when kernels/grouped_gemm.py was written so by hand
(session 25).

Only top-level statements (not inside loops or ifs) are staged, and only when the kernel's shared
memory, counted without any reuse, still fits the architecture with the staging tile added, so
this pass never turns a kernel that compiled into one that does not.
`pass_configs={"tc.stage_epilogue": False}` turns it off.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import (Alloc, Binary, Buffer, Cast, Copy, For, Gemm, If, Kernel, Load, Mutator, Region, Seq, Store, Var,
                  binary, collect, const, seq)
from ..ir.functor import substitute
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
            if isinstance(s, Copy):
                staged = self._stage(s, used)
            elif isinstance(s, For) and s.kind == "parallel":
                staged = self._stage_guarded(s, used)
            else:
                staged = None
            if staged is None:
                out.append(s)
                continue
            used += staged[0].buffer.nbytes
            out += list(staged)
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

    def _stage_guarded(self, outer: For, used: int):
        """The guarded element store of the module docstring, staged; None where it does not match."""
        inner = outer.body
        if not (isinstance(inner, For) and inner.kind == "parallel" and isinstance(inner.body, If)
                and inner.body.orelse is None and isinstance(inner.body.then, Store)):
            return None
        i, j, guard, store = outer.var, inner.var, inner.body.cond, inner.body.then
        dst = store.buffer
        if dst.scope != "global" or dst.ndim != 2 or dst.dtype.bytes not in (2, 4):
            return None
        rows, cols = outer.extent, inner.extent
        if not (_is_int(outer.start, 0) and _is_int(inner.start, 0) and _is_int(rows) and _is_int(cols)):
            return None
        rows, cols = rows.value, cols.value
        r, c = _offset(store.indices[0], i, (i, j)), _offset(store.indices[1], j, (i, j))
        terms = _guard_terms(guard, (i, j))
        frag = [ld for ld in collect(store.value, lambda n: isinstance(n, Load)) if ld.buffer in self.accumulators]
        if r is None or c is None or terms is None or not any(_at(ld, i, j) for ld in frag):
            return None
        if (rows, cols) != tuple(frag[0].buffer.shape) or any(not _at(ld, i, j) for ld in frag):
            return None
        loads = collect(store.value, lambda n: isinstance(n, Load))
        if any(ld.buffer.scope not in ("fragment", "local", "global") for ld in loads):
            return None
        stage = Buffer(f"{dst.name}_stage", (rows, cols + PAD), dst.dtype, "shared", span=store.span)
        if used + stage.nbytes > self.budget:
            return None
        tile = Region(stage, (const(0), const(0)), (rows, cols), span=store.span)
        # a cast to the destination's type is the copy's own conversion (a cast to another type rounds twice)
        value = store.value.value if isinstance(store.value, Cast) and store.value.type == dst.dtype else store.value
        if isinstance(value, Load) and value.buffer in self.accumulators:   # the accumulator itself: its copy
            first = Copy(Region.whole(value.buffer), tile, span=store.span)
        else:   # arithmetic on it: the same element loop, into the stage (guarded where it reads global memory)
            put = Store(stage, (i, j), store.value, span=store.span)
            if any(ld.buffer.scope == "global" for ld in loads):
                put = If(guard, put, span=inner.body.span)
            first = _fresh(replace(outer, body=replace(inner, body=put)))
        whole = Copy(tile, Region(dst, (r, c), (rows, cols), span=store.span), span=store.span)
        full = _and([substitute(t, {i: const(rows - 1), j: const(cols - 1)}) for t in terms])
        parts = replace(outer, body=replace(inner, body=replace(inner.body, then=replace(
            store, value=Load(stage, (i, j), span=store.span)))))
        return Alloc(stage), first, If(full, whole, _fresh(parts), span=outer.span)


def _is_int(e, value=None) -> bool:
    v = getattr(e, "value", None)
    return isinstance(v, int) and not isinstance(v, bool) and (value is None or v == value)


def _free_of(e, names) -> bool:
    return not collect(e, lambda n: isinstance(n, Var) and any(n is v for v in names))


def _offset(index, var, names):
    """`r` where `index` is `r + var` / `var + r` / `var` with `r` free of `names`; else None."""
    if index is var:
        return const(0)
    if isinstance(index, Binary) and index.op == "+":
        if index.b is var and _free_of(index.a, names):
            return index.a
        if index.a is var and _free_of(index.b, names):
            return index.b
    return None


def _guard_terms(cond, names):
    """The comparisons of a conjunction, each `e < X`-like with `e` one index (plus free terms), or None."""
    if isinstance(cond, Binary) and cond.op in ("and", "&"):
        a, b = _guard_terms(cond.a, names), _guard_terms(cond.b, names)
        return None if a is None or b is None else a + b
    if not isinstance(cond, Binary) or cond.op not in ("<", "<=", ">", ">="):
        return None
    small, big = (cond.a, cond.b) if cond.op in ("<", "<=") else (cond.b, cond.a)
    if not _free_of(big, names):
        return None
    if not any(_offset(small, v, names) is not None for v in names):
        return None
    return [cond]


def _at(ld: Load, i, j) -> bool:
    return len(ld.indices) == 2 and ld.indices[0] is i and ld.indices[1] is j


def _and(terms):
    out = terms[0]
    for t in terms[1:]:
        out = binary("and", out, t)
    return out


def _fresh(nest: For) -> For:
    """The two-loop nest with loop variables of its own (each loop binds its own Var)."""
    inner = nest.body
    i, j = Var(nest.var.name, nest.var.type), Var(inner.var.name, inner.var.type)
    return replace(nest, var=i, body=substitute(replace(inner, var=j), {nest.var: i, inner.var: j}))


def stage_epilogue(func: PrimFunc, ctx) -> PrimFunc:
    if not ctx.options.stage_epilogue or is_manual(func.body):
        return func  # T.ws branches: their stores go out as written (an optimisation only)
    accumulators = {g.c.buffer for g in collect(func.body, lambda n: isinstance(n, Gemm)) if g.plan is not None}
    if not accumulators:
        return func
    return func.with_body(_Stage(accumulators, ctx.target.max_shared_memory).visit(func.body))

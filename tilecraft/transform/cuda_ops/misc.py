"""CUDA lowering of `T.atomic_*`, `T.cumsum` and `T.print`."""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import (AtomicAdd, Buffer, Const, Cumsum, If, Load, Print, Ref, Region, Sync, binary, cast, const, seq)
from ...ir.expr import is_const
from ...ir import same
from ...ir import intrinsics as I
from ...ir.semantics import region_indices
from .ctx import Ctx, register, _whole_fragment
from .tma_reduce import tma_reduce_issue


@register(AtomicAdd)
def lower_atomic(op: AtomicAdd, ctx: Ctx):
    fn = I.atomic(op.kind)
    if not isinstance(op.value, Region):
        return I.evaluate(fn, Ref(op.dst.buffer, op.dst.starts), op.value, span=op.span)
    v = op.value
    if v.buffer.scope == "fragment":
        _whole_fragment(v, "T.atomic_add", op.span)
        reg = ctx.reg(v.buffer)
        lay = ctx.layout(v.buffer, op.span)
        keep = [k for k, n in enumerate(v.buffer.shape) if n != 1]
        loop = ctx.per_slot(lay, lambda r, co: I.evaluate(
            fn, Ref(op.dst.buffer, region_indices(op.dst, [co[k] for k in keep])),
            cast(Load(reg, (r,)), op.dst.buffer.dtype)), op.span)
        return ctx.first_replica(lay, loop)
    bulk = _bulk_reduce(op, ctx)
    if bulk is not None:
        return bulk
    shape = v.squeezed_shape() or (1,)
    sq = not v.squeezed_shape()
    return ctx.strided(shape, lambda ix: I.evaluate(
        fn, Ref(op.dst.buffer, region_indices(op.dst, [] if sq else ix)),
        cast(Load(v.buffer, region_indices(v, [] if sq else ix)), op.dst.buffer.dtype)), op.span)


def _bulk_reduce(op: AtomicAdd, ctx: Ctx):
    """`T.atomic_add(G[...], S)` of a shared tile into global memory on sm_90+: one TMA bulk reduce-add
    per row of the tile (tc::bulk_reduce_add: the TMA unit reads the row from shared memory and adds it
    element by element, each element atomically in L2) instead of one atomic per element and thread.
    The same sums, relaxed atomics as before; measured on the H200 (FlashAttention backward, dQ):
    benchmarks/results.  None where it does not apply: the rows must be contiguous and 16-byte
    multiples in both memories (plain row-major shared tile, the destination's whole last dimension)."""
    v, d = op.value, op.dst
    if not ctx.bulk_reduce or op.kind != "add" or v.buffer.scope != "shared" or d.buffer.scope != "global":
        return None
    issue = tma_reduce_issue(op, ctx)   # a tile in the 128-byte swizzle: TMA tensor reduces (tma_reduce.py)
    if issue is None:
        issue = _row_issue(op, ctx)
    if issue is None:
        return None
    fenced = seq(I.evaluate(I.FenceProxyAsyncShared()), Sync(), issue)
    if ctx.only_atomically_added(d.buffer) and ctx.threads == ctx.kernel.num_threads:
        # nothing in the kernel reads the destination: wait for the shared reads only before the tile is
        # written again, placed by transform/place_bulk_waits.py (the block computes meanwhile)
        return seq(fenced, I.evaluate(I.BulkCommit(), Ref(v.buffer, tuple(const(0) for _ in v.buffer.shape))))
    # the kernel reads the destination (wait until the adds are done, so a later barrier makes them
    # visible), or a warp-group branch issues it (its barriers are its own): wait here
    return seq(fenced, I.evaluate(I.BulkCommitWait(read_only=ctx.only_atomically_added(d.buffer))), Sync())


def _row_issue(op: AtomicAdd, ctx: Ctx):
    """The bulk reduces of a plain row-major tile: one per row, or one for a tile that is one run in
    both memories; None where its rows are not contiguous 16-byte multiples in both."""
    v, d = op.value, op.dst
    dtype = d.buffer.dtype
    if v.buffer.dtype != dtype or dtype.name not in ("float32", "float16", "bfloat16"):
        return None
    if v.buffer in ctx.swizzled or v.buffer in ctx.smem_layouts:
        return None
    shape = v.squeezed_shape()
    if not shape or tuple(shape) != tuple(d.squeezed_shape()):
        return None
    n = shape[-1]
    row_bytes = n * dtype.bytes
    sv, sd = v.buffer.shape, d.buffer.shape
    # the row runs along each buffer's last dimension, which is whole in the destination (its start 0,
    # its extent the tensor's: every row in bounds along it, 16-byte multiples apart)
    if not (isinstance(n, int) and row_bytes % 16 == 0 and v.extents[-1] == n and d.extents[-1] == n
            and isinstance(sd[-1], int) and sd[-1] == n and is_const(d.starts[-1], 0)
            and isinstance(sv[-1], int) and (sv[-1] * dtype.bytes) % 16 == 0
            and isinstance(v.starts[-1], Const) and (v.starts[-1].value * dtype.bytes) % 16 == 0):
        return None
    rows = tuple(shape[:-1]) or (1,)
    zero = const(0)

    def row(ix):
        ix = list(ix) if shape[:-1] else []
        return I.evaluate(I.BulkReduceAdd(bytes=row_bytes), Ref(d.buffer, region_indices(d, ix + [zero])),
                          Ref(v.buffer, region_indices(v, ix + [zero])), span=op.span)
    whole = _one_run(v, d) if shape[:-1] else None
    if whole is not None:
        # the tile is one contiguous run in both memories (FlashAttention backward's head-major dQ
        # accumulator): one instruction for its in-bounds rows instead of one per row
        p, inner = whole
        inside = binary("max", binary("min", binary("-", sd[p], d.starts[p]), d.extents[p]), 0)
        issue = If(binary("==", ctx.tid, 0), I.evaluate(
            I.BulkReduceAddN(), Ref(d.buffer, tuple(d.starts)), Ref(v.buffer, tuple(v.starts)),
            binary("*", inside, inner * dtype.bytes), span=op.span))
    else:
        issue = ctx.strided(rows, row, op.span)
    return issue


def _one_run(v: Region, d: Region):
    """(p, inner) when the shared region v and the global region d are each one contiguous run of
    memory (after their first dimension of extent > 1, every dimension whole from 0): p is d's first
    such dimension (its rows may run past the tensor's end) and `inner` the elements per index of it."""
    def first_dim(r):
        ps = [k for k, e in enumerate(r.extents) if not same(e, 1)]
        if not ps:
            return None
        p = ps[0]
        for k in range(p + 1, r.buffer.ndim):
            if not (is_const(r.starts[k], 0) and isinstance(r.buffer.shape[k], int)
                    and same(r.extents[k], r.buffer.shape[k])):
                return None
        return p
    pv, pd = first_dim(v), first_dim(d)
    if pv is None or pd is None:
        return None
    inner = 1
    for k in range(pd + 1, d.buffer.ndim):
        inner *= d.buffer.shape[k]
    return pd, inner


@register(Cumsum)
def lower_cumsum(op: Cumsum, ctx: Ctx):
    if op.src.scope != "shared" or op.dst.scope != "shared":
        raise TilecraftError("T.cumsum on CUDA supports shared tiles only for now", op.span)
    from ...ir.semantics import FreshVars
    from ..lower_tile_ops_cpu import lower_cumsum as cpu_scan
    serial = cpu_scan(op, FreshVars())
    return seq(Sync(), If(binary("==", ctx.tid, 0), serial), Sync())


@register(Print)
def lower_print(op: Print, ctx: Ctx):
    if isinstance(op.value, Buffer):
        b = op.value
        if b.scope == "fragment":
            reg = ctx.reg(b)
            return ctx.per_slot(ctx.layout(b, op.span), lambda r, co: I.evaluate(
                I.PrintElem(tuple(b.shape)), op.msg or b.name, Load(reg, (r,)), *co), op.span)
        from ...ir.semantics import FreshVars
        from ..lower_tile_ops_cpu import lower_print as cpu_print
        return If(binary("==", ctx.tid, 0), cpu_print(op, FreshVars()))
    return If(binary("==", ctx.tid, 0), I.evaluate(I.Print(), op.msg, op.value, span=op.span))


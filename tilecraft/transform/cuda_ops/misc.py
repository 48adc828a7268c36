"""CUDA lowering of `T.atomic_*`, `T.cumsum` and `T.print`."""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import (AtomicAdd, Buffer, Cumsum, If, Load, Print, Ref, Region, Sync, binary, cast, seq)
from ...ir import intrinsics as I
from ...ir.semantics import region_indices
from .ctx import Ctx, register, _whole_fragment


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
    shape = v.squeezed_shape() or (1,)
    sq = not v.squeezed_shape()
    return ctx.strided(shape, lambda ix: I.evaluate(
        fn, Ref(op.dst.buffer, region_indices(op.dst, [] if sq else ix)),
        cast(Load(v.buffer, region_indices(v, [] if sq else ix)), op.dst.buffer.dtype)), op.span)


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


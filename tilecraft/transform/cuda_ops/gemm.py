"""CUDA lowering of `T.gemm`: tensor cores through the header library, else per-register dot products."""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import (Sync, Alloc, Buffer, For, Gemm, Load, Ref, Store, binary, cast, const, seq, dtype as dt)
from ...ir import intrinsics as I
from ...ir.lowering import WGMMA_PLANS, Mma80Plan, WgmmaPlan, WgmmaRSPlan
from ...ir.layout.fragment import mma_accumulator_layout, wgmma_accumulator_layout
from ...ir.semantics import gemm_accumulator_dtype, region_indices, shared_row_stride
from .ctx import Ctx, register, _whole_fragment


@register(Gemm)
def lower_gemm(g: Gemm, ctx: Ctx):
    m, n, k = g.mnk
    if g.c.buffer.scope == "shared" and g.plan is None:
        return _shared_accumulator(g, ctx, m, n, k)
    if g.c.buffer.scope != "fragment":
        raise TilecraftError(f"T.gemm: the accumulator {g.c.buffer.name} is a {g.c.buffer.scope} buffer; on the "
                             f"CUDA target a gemm accumulates into a T.alloc_fragment tile", g.span)
    _whole_fragment(g.c, "T.gemm accumulator", g.span)
    for x, what in ((g.a, "A"), (g.b, "B")):
        if x.buffer.scope == "fragment":
            _whole_fragment(x, f"T.gemm operand {what}", g.span)
        elif x.buffer.scope == "local":
            raise TilecraftError(f"T.gemm: operand {what} ({x.buffer.name}) is a T.alloc_local buffer; on the CUDA "
                                 f"target gemm operands live in shared memory or fragments", g.span)
    c_reg = ctx.reg(g.c.buffer)
    pre = None
    if g.clear_accum:
        pre = ctx.per_slot(ctx.layout(g.c.buffer, g.span), lambda r, _: Store(c_reg, (r,), cast(0, c_reg.dtype)))
    plan = g.plan
    if g.async_groups and not isinstance(plan, WGMMA_PLANS):
        raise TilecraftError("internal: asynchronous wgmma groups asked of a gemm not on the wgmma path", g.span)
    if g.pipeline_hook is not None and not (isinstance(plan, Mma80Plan) and g.a.buffer.scope == "shared"):
        raise TilecraftError("internal: a software pipeline's barrier was moved into a gemm that is not on the "
                             "mma.sync shared-shared path", g.span)
    if isinstance(plan, WgmmaRSPlan):
        return _wgmma_rs(ctx, g, plan, pre, c_reg, m, n, k)
    if isinstance(plan, WgmmaPlan):
        # the tiles' row counts: the height of their column panels (gemm_sm90.h)
        intr = I.GemmSSSm90(m, n, k, plan.warpgroups, g.trans_a, g.trans_b, _elem(g), g.async_groups or 0,
                            g.a.buffer.shape[-2], g.b.buffer.shape[-2], plan.wg_n)
        call_ = I.evaluate(intr, Ref(g.a.buffer, g.a.starts), Ref(g.b.buffer, g.b.starts), Ref(c_reg, (const(0),)),
                           span=g.span)
        if g.tma_fed:  # TMA writes are in the async proxy already, and each thread waited for them
            return seq(pre, call_)
        # the tensor cores read shared memory through the async proxy: every writer fences its
        # ordinary / cp.async writes into that proxy before the barrier that precedes the gemm
        return seq(pre, I.evaluate(I.FenceProxyAsyncShared()), Sync(), call_)
    if isinstance(plan, Mma80Plan) and g.a.buffer.dtype.packed:   # infer_layouts.int4_mma_capable
        args = (Ref(g.a.buffer, g.a.starts), Ref(g.b.buffer, g.b.starts), Ref(c_reg, (const(0),)))
        if g.pipeline_hook is not None:
            args += (g.pipeline_hook,)
        return seq(pre, I.evaluate(I.GemmSSS4(m, n, k, plan.warps_m, plan.warps_n), *args, span=g.span))
    if isinstance(plan, Mma80Plan):
        wm, wn = plan.warps_m, plan.warps_n
        swz_b = int(g.b.buffer in ctx.swizzled)
        b_ref = Ref(g.b.buffer, g.b.starts)
        if g.a.buffer.scope == "fragment":
            expect = mma_accumulator_layout((m, k), ctx.threads, wm, 1) if wn == 1 else None
            lay = ctx.layout(g.a.buffer, g.span)
            if expect is None or not lay.equivalent(expect):
                warps = ctx.threads // 32
                raise TilecraftError(
                    f"T.gemm: A operand {g.a.buffer.name} is a fragment whose register layout is not the "
                    f"tensor-core A layout this gemm needs; produce it from a T.gemm accumulator with the "
                    f"same block_M and warps along M only (policy=T.GemmWarpPolicy.FullRow). With {ctx.threads} "
                    f"threads the {m} rows must split over {warps} warps of 16 rows each"
                    + (f": use threads <= {max(32, m // 16 * 32)} for block_M={m}" if m < 16 * warps else ""), g.span)
            ldb = shared_row_stride(g.b)
            intr = (I.GemmRS(m, n, k, wm, wn, g.trans_b, swz_b, _elem(g)) if ldb == (k if g.trans_b else n) else
                    I.GemmRSLd(m, n, k, wm, wn, g.trans_b, swz_b, _elem(g), ldb))
            c = I.evaluate(intr, Ref(ctx.reg(g.a.buffer), (const(0),)), b_ref, Ref(c_reg, (const(0),)), span=g.span)
        else:
            swz_a = int(g.a.buffer in ctx.swizzled)
            args = (Ref(g.a.buffer, g.a.starts), b_ref, Ref(c_reg, (const(0),)))
            if g.pipeline_hook is not None:  # the pipeline's sync, run before the last k16 step
                args += (g.pipeline_hook,)
            # a column slice of a wider shared tile keeps its parent's row stride (gemm_ss_ld)
            lda, ldb = shared_row_stride(g.a), shared_row_stride(g.b)
            ss = (m, n, k, wm, wn, g.trans_a, g.trans_b, swz_a, swz_b, _elem(g))
            intr = (I.GemmSS(*ss) if (lda, ldb) == (m if g.trans_a else k, k if g.trans_b else n) else
                    I.GemmSSLd(*ss, lda, ldb))
            c = I.evaluate(intr, *args, span=g.span)
        return seq(pre, c)
    for x, what in ((g.a, "A"), (g.b, "B")):
        if x.buffer.scope == "fragment":
            raise TilecraftError(f"T.gemm: operand {what} ({x.buffer.name}, {x.buffer.dtype}) in registers needs "
                                 f"the tensor-core path (float16/bfloat16 inputs, float32 accumulator, tile sizes "
                                 f"that split into 16x8 warp tiles); put it in shared memory instead", g.span)
    lay = ctx.layout(g.c.buffer, g.span)
    acc_t = gemm_accumulator_dtype(c_reg.dtype)

    def body(r, coords):
        i, j = coords
        kk = ctx.var("k")
        acc = Buffer(f"acc{kk.name}", (1,), acc_t, "local")
        a = Load(g.a.buffer, region_indices(g.a, [kk, i] if g.trans_a else [i, kk]))
        b = Load(g.b.buffer, region_indices(g.b, [j, kk] if g.trans_b else [kk, j]))
        a0 = Load(acc, (const(0),))
        # `#pragma unroll 1`: the slots are unrolled (their registers), the k loop is not -- unrolled both
        # ways a 256x128x64 tile was 16K multiply-adds per thread and NVRTC took 168 s on it
        return seq(Alloc(acc), Store(acc, (const(0),), cast(Load(c_reg, (r,)), acc_t)),
                   For(kk, const(0), const(k), "serial",
                       Store(acc, (const(0),), binary("+", a0, binary("*", cast(a, acc_t), cast(b, acc_t)))),
                       annotations=(("unroll", 1),)),
                   Store(c_reg, (r,), cast(a0, c_reg.dtype)))
    return seq(pre, ctx.per_slot(lay, body, g.span))



def _shared_accumulator(g: Gemm, ctx: Ctx, m: int, n: int, k: int):
    """A tcgen05 gemm into tensor memory (a shared tile) in the CPU target's thread-level mode
    (no tensor cores; CUDA targets refuse tcgen05 first, transform/validate/arch.py): the M x N
    elements spread over the threads that run the gemm, each a dot product over K.  Operands in
    shared memory only; the result is complete once every one of those threads has done its share
    (the commit that follows is a barrier of them: lower_manual_sync_cuda)."""
    for x, what in ((g.a, "A"), (g.b, "B")):
        if x.buffer.scope != "shared":
            raise TilecraftError(f"T.gemm into the shared / tensor-memory tile {g.c.buffer.name}: operand {what} "
                                 f"({x.buffer.name}) is a {x.buffer.scope} buffer; with the accumulator in shared or "
                                 f"tensor memory both operands come from shared or tensor memory", g.span)
    acc_t = gemm_accumulator_dtype(g.c.buffer.dtype)

    def body(idx):
        i, j = idx
        kk = ctx.var("k")
        acc = Buffer(f"acc{kk.name}", (1,), acc_t, "local")
        a = Load(g.a.buffer, region_indices(g.a, [kk, i] if g.trans_a else [i, kk]))
        b = Load(g.b.buffer, region_indices(g.b, [j, kk] if g.trans_b else [kk, j]))
        a0 = Load(acc, (const(0),))
        c_idx = region_indices(g.c, [i, j])
        start = cast(0, acc_t) if g.clear_accum else cast(Load(g.c.buffer, c_idx), acc_t)
        return seq(Alloc(acc), Store(acc, (const(0),), start),
                   For(kk, const(0), const(k), "serial",
                       Store(acc, (const(0),), binary("+", a0, binary("*", cast(a, acc_t), cast(b, acc_t))))),
                   Store(g.c.buffer, c_idx, cast(a0, g.c.buffer.dtype)))
    return ctx.strided((m, n), body, g.span)


def _wgmma_rs(ctx: Ctx, g: Gemm, plan, pre, c_reg, m: int, n: int, k: int):
    """A (a fragment in the wgmma accumulator layout) from registers, B from shared memory:
    tc::gemm_rs_sm90 (synchronous), or tc::gemm_rs_sm90_async with `async_groups`.  B's writers fence into the async proxy before the barrier."""
    lay, want = ctx.layout(g.a.buffer, g.span), wgmma_accumulator_layout((m, k), ctx.threads)
    if not lay.same_as(want):
        raise TilecraftError(f"internal: wgmma A operand {g.a.buffer.name} is not in the wgmma accumulator layout",
                             g.span)
    args = (Ref(ctx.reg(g.a.buffer), (const(0),)), Ref(g.b.buffer, g.b.starts), Ref(c_reg, (const(0),)))
    if g.async_groups:  # left in flight, its packed A in g.held (transform/pipelining/overlap.py)
        if g.held is None:
            raise TilecraftError("internal: an asynchronous wgmma with A from registers needs its held registers", g.span)
        intr = I.GemmRSSm90Async(m, n, k, plan.warpgroups, g.trans_b, _elem(g), g.b.buffer.shape[-2])
        call_ = I.evaluate(intr, *args, Ref(g.held, (const(0),)), span=g.span)
    else:
        call_ = I.evaluate(I.GemmRSSm90(m, n, k, plan.warpgroups, g.trans_b, _elem(g), g.b.buffer.shape[-2]),
                           *args, span=g.span)
    if g.tma_fed:  # B came by TMA (async proxy, waited for by every thread)
        return seq(pre, call_)
    return seq(pre, I.evaluate(I.FenceProxyAsyncShared()), Sync(), call_)


def _elem(g: Gemm):
    """The tensor-core element type (the header's T): bfloat16 or float16; an 8-bit float as it is
    (wgmma's k32 form, or mma.sync m16n8k32 on sm_89+: infer_layouts.wgmma_capable / mma_capable)."""
    if g.a.buffer.dtype.name in ("float8_e4m3fn", "float8_e5m2"):
        return g.a.buffer.dtype
    return dt.float16 if g.a.buffer.dtype.name == "float16" else dt.bfloat16

"""CUDA lowering of `T.copy` (register walks, 16-byte vectors, cp.async) and `T.fill`."""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import (Alloc, Buffer, Copy, Fill, For, If, Load, Ref, Region, Store, binary, cast, const, is_const, seq, dtype as dt)
from ...ir import intrinsics as I
from ...ir.layout.fragment import FragmentLayout
from ...ir.semantics import region_indices, slice_dims
from .ctx import Ctx, register, _whole_fragment


@register(Copy)
def lower_copy(op: Copy, ctx: Ctx):
    s, d = op.src, op.dst
    if s.buffer.scope == "fragment" and d.buffer.scope == "fragment":
        if not s.covers_whole() and d.covers_whole():
            sliced = _fragment_slice_copy(op, ctx)
            if sliced is not None:
                return sliced
        _whole_fragment(s, "T.copy", op.span)
        _whole_fragment(d, "T.copy", op.span)
        ls, ld = ctx.layout(s.buffer, op.span), ctx.layout(d.buffer, op.span)
        if not ls.equivalent(ld):
            raise TilecraftError(f"T.copy between fragments {s.buffer.name} and {d.buffer.name} with different "
                                 f"register layouts is not supported on CUDA yet", op.span)
        rs, rd = ctx.reg(s.buffer), ctx.reg(d.buffer)
        return ctx.per_slot(ls, lambda r, _: Store(rd, (r,), cast(Load(rs, (r,)), rd.dtype)), op.span)
    if d.buffer.scope == "fragment" or s.buffer.scope == "fragment":
        frag, other = (d, s) if d.buffer.scope == "fragment" else (s, d)
        if not frag.covers_whole():
            return _fragment_part_copy(frag, other, frag is d, ctx, op.span)
        lay = ctx.layout(frag.buffer, op.span)
        reg = ctx.reg(frag.buffer)
        keep = [k for k, n in enumerate(frag.buffer.shape) if n != 1]
        vec = _vector_width(lay, frag, other, ctx) if frag is not d or ctx.oob.zero_fill_ok(d.buffer, s.buffer) else 1
        if vec > 1:
            return _vector_copy(lay, reg, frag is d, other, keep, vec, ctx, op.span)

        def body(r, coords):
            tile = [coords[k] for k in keep]
            oidx = region_indices(other, tile)
            if frag is d:
                return Store(reg, (r,), cast(Load(other.buffer, oidx), reg.dtype))
            return Store(other.buffer, oidx, cast(Load(reg, (r,)), other.buffer.dtype))
        return ctx.per_slot(lay, body, op.span)
    if s.buffer.scope in ("local", "var") or d.buffer.scope in ("local", "var"):
        return _per_thread_copy(s, d, ctx, op.span)
    vec = _strided_vector_width(s, d) if ctx.oob.zero_fill_ok(d.buffer, s.buffer) else 1
    if vec > 1 and (d.buffer.scope != "shared" or vec * s.buffer.dtype.bits >= 32):  # cp.async: 4, 8 or 16 bytes
        return _strided_vector_copy(op, vec, ctx)
    vec = _converting_vector_width(s, d) if ctx.oob.zero_fill_ok(d.buffer, s.buffer) else 1
    if vec > 1:
        return _converting_vector_copy(op, vec, ctx)
    shape = s.squeezed_shape() or (1,)
    squeeze = not s.squeezed_shape()
    return ctx.strided(shape, lambda ix: Store(
        d.buffer, region_indices(d, [] if squeeze else ix),
        cast(Load(s.buffer, region_indices(s, [] if squeeze else ix)), d.buffer.dtype)), op.span)


def _per_thread_copy(s: Region, d: Region, ctx: Ctx, span):
    """A copy to or from a thread's own local buffer (`T.alloc_local` / `T.alloc_var`): every thread that
    runs it moves every element (a local buffer is per thread, so the copy is not spread over threads)."""
    shape = s.squeezed_shape() or (1,)
    squeeze = not s.squeezed_shape()
    ix = [ctx.var("l") for _ in shape]
    body = Store(d.buffer, region_indices(d, [] if squeeze else ix),
                 cast(Load(s.buffer, region_indices(s, [] if squeeze else ix)), d.buffer.dtype), span=span)
    for v, n in reversed(list(zip(ix, shape))):
        body = For(v, const(0), const(n), "unroll", body, span=span)
    return body


def _fragment_part_copy(frag: Region, other: Region, into_frag: bool, ctx: Ctx, span):
    """A part of a fragment to or from memory (`T.copy(acc_o[:valid_H, :], O_shared)`): each
    thread visits its registers and moves those inside the part (no vectors)."""
    lay = ctx.layout(frag.buffer, span)
    reg = ctx.reg(frag.buffer)
    keep = [k for k, n in enumerate(frag.extents) if n != 1]

    def body(r, coords):
        tile = [binary("-", coords[k], frag.starts[k]) for k in keep]
        oidx = region_indices(other, tile)
        if into_frag:
            st = Store(reg, (r,), cast(Load(other.buffer, oidx), reg.dtype))
        else:
            st = Store(other.buffer, oidx, cast(Load(reg, (r,)), other.buffer.dtype))
        cond = None
        for k, (start, ext) in enumerate(zip(frag.starts, frag.extents)):
            if is_const(start, 0) and ext == frag.buffer.shape[k]:
                continue
            c = binary("and", binary(">=", coords[k], start), binary("<", coords[k], binary("+", start, ext)))
            cond = c if cond is None else binary("and", cond, c)
        return st if cond is None else If(cond, st)
    return ctx.per_slot(lay, body, span)


def _fragment_slice_copy(op: Copy, ctx: Ctx):
    """`T.copy(src[k, :], dst)` between fragments, `k` uniform: the dimensions of `src` the
    region takes whole must be laid out as `dst` and the others held whole in every thread's
    registers (layout.fragment.uniform_slot_part), so each thread copies register to register.
    None otherwise (then refused as a partial copy)."""
    from ...ir.layout.fragment import uniform_slot_part
    s, d = op.src, op.dst
    ls, ld = ctx.layout(s.buffer, op.span), ctx.layout(d.buffer, op.span)
    dims, full = slice_dims(s, d)
    if dims is None:
        return None
    part = uniform_slot_part(ls, dims)
    if part is None or not ls.project(full).equivalent(ld):
        return None
    rs, rd = ctx.reg(s.buffer), ctx.reg(d.buffer)

    def body(r, _):
        slot = r
        for k, stride in part:
            slot = binary("+", slot, binary("*", s.starts[k], stride))
        return Store(rd, (r,), cast(Load(rs, (slot,)), rd.dtype))
    return ctx.per_slot(ld, body, op.span)


def _vector_width(lay: FragmentLayout, frag: Region, other: Region, ctx: Ctx) -> int:
    """How many consecutive fragment registers map to consecutive, aligned elements of `other`
    (so one 4/8/16-byte access moves them); 1 when that cannot be proved."""
    from ...ir.analysis import divisible
    if (not lay.reg_digits or not keep_last(frag) or other.buffer.scope not in ("global", "shared")
            or frag.buffer.dtype.packed or other.buffer.dtype.packed):   # int4: element by element
        return 1
    first = lay.reg_digits[0]
    last = len(frag.buffer.shape) - 1
    if (first.name, 1) not in lay.coords[last]:
        return 1
    ob = other.buffer
    non_unit = [k for k, n in enumerate(other.extents) if n != 1]
    if not non_unit or non_unit[-1] != ob.ndim - 1 or other.extents[-1] != frag.buffer.shape[-1]:
        return 1
    v = first.extent
    while v > 1:
        nbytes = v * ob.dtype.bytes
        if (nbytes in (4, 8, 16) and isinstance(ob.shape[-1], int) and ob.shape[-1] % v == 0
                and divisible(other.starts[-1], v)
                and all(coef % v == 0 for name, coef in lay.coords[last] if name != first.name)
                and first.extent % v == 0):
            return v
        v //= 2
    return 1


def _strided_vector_width(s: Region, d: Region) -> int:
    """16-byte (or narrower) vectors for a global<->shared tile copy, when provably aligned."""
    from ...ir.analysis import divisible
    pair = {s.buffer.scope, d.buffer.scope}
    if pair != {"global", "shared"} or s.buffer.dtype is not d.buffer.dtype:
        return 1
    for r in (s, d):
        nu = [k for k, n in enumerate(r.extents) if n != 1]
        if not nu or nu[-1] != r.buffer.ndim - 1 or not isinstance(r.buffer.shape[-1], int):
            return 1
    if s.extents[-1] != d.extents[-1]:
        return 1
    v = 128 // s.buffer.dtype.bits   # elements in 16 bytes (int4: 32, two per byte)
    while v > 1:
        if all(r.extents[-1] % v == 0 and r.buffer.shape[-1] % v == 0 and divisible(r.starts[-1], v)
               for r in (s, d)):
            return v
        v //= 2
    return 1


def _converting_vector_width(s: Region, d: Region) -> int:
    """Vectors of up to 16 bytes on each side for a shared-memory tile copy that changes the element type
    (an fp8 KV tile widened to bf16 for a gemm): both last dims contiguous and equal in extent, every start
    and row length a multiple of the vector (then a vector never crosses a 16-byte chunk of a swizzled
    tile), 2-byte-or-wider elements on one side; 1 when it does not apply."""
    from ...ir.analysis import divisible
    if "shared" not in (s.buffer.scope, d.buffer.scope) or not {s.buffer.scope, d.buffer.scope} <= {"shared", "global"} \
            or s.buffer.dtype is d.buffer.dtype or s.buffer.dtype.packed or d.buffer.dtype.packed:
        return 1
    for r in (s, d):
        nu = [k for k, n in enumerate(r.extents) if n != 1]
        if not nu or nu[-1] != r.buffer.ndim - 1 or not isinstance(r.buffer.shape[-1], int):
            return 1
    if s.extents[-1] != d.extents[-1] or s.squeezed_shape() != d.squeezed_shape():
        return 1
    v = 16 // max(s.buffer.dtype.bytes, d.buffer.dtype.bytes)
    while v > 1:
        if all(r.extents[-1] % v == 0 and r.buffer.shape[-1] % v == 0 and divisible(r.starts[-1], v) for r in (s, d)):
            return v
        v //= 2
    return 1


# A thread's converting copy loads all its vectors before it converts and stores any, when they fit in this
# many bytes of registers: loads and stores one after another were serialised (ptxas cannot tell the tiles
# apart, so no load passes the previous store): an fp8 KV tile widened in MLA decode waited out the
# shared-load latency 16 times a tile (H200, session 28, B64 H16 KV8192 split kernel: 173 -> 162 us; with
# element-wise conversions 199 -> 185 us).
STAGED_CONVERT_BYTES = 256


def _converting_vector_copy(op: Copy, vec: int, ctx: Ctx):
    s, d = op.src, op.dst
    shape = list(s.squeezed_shape())
    shape[-1] //= vec
    iters = ctx.strided_iterations(shape)
    if 1 < iters <= 16 and iters * vec * s.buffer.dtype.bytes <= STAGED_CONVERT_BYTES:
        return _staged_converting_copy(op, vec, tuple(shape), iters, ctx)

    def body(ix):
        ix = list(ix[:-1]) + [binary("*", ix[-1], vec)]
        return I.evaluate(I.VecConvert(d.buffer.dtype, s.buffer.dtype, vec), Ref(d.buffer, region_indices(d, ix)),
                          Ref(s.buffer, region_indices(s, ix)), span=op.span)
    return ctx.strided(tuple(shape), body, op.span)


def _staged_converting_copy(op: Copy, vec: int, shape: tuple, iters: int, ctx: Ctx):
    """`_converting_vector_copy` in two unrolled loops over the same elements: every vector loaded into
    registers (unconverted, zeros past a global tensor's edge), then each converted and stored."""
    s, d = op.src, op.dst
    stage = Buffer(ctx.var("cvt_stage").name, (iters * vec,), s.buffer.dtype, "local", span=op.span)

    def load(ix, it):
        ix = list(ix[:-1]) + [binary("*", ix[-1], vec)]
        return I.evaluate(I.VecLoadZfill(s.buffer.dtype, s.buffer.dtype, vec), Ref(stage, (binary("*", it, vec),)),
                          Ref(s.buffer, region_indices(s, ix)), span=op.span)

    def store(ix, it):
        ix = list(ix[:-1]) + [binary("*", ix[-1], vec)]
        return I.evaluate(I.VecStore(d.buffer.dtype, s.buffer.dtype, vec), Ref(d.buffer, region_indices(d, ix)),
                          Ref(stage, (binary("*", it, vec),)), span=op.span)
    return seq(Alloc(stage), ctx.strided(shape, load, op.span, with_iteration=True),
               ctx.strided(shape, store, op.span, with_iteration=True))


def _strided_vector_copy(op: Copy, vec: int, ctx: Ctx):
    s, d = op.src, op.dst
    shape = list(s.squeezed_shape())
    shape[-1] //= vec
    nbytes = vec * s.buffer.dtype.bits // 8

    def body(ix):
        ix = list(ix[:-1]) + [binary("*", ix[-1], vec)]
        sref, dref = Ref(s.buffer, region_indices(s, ix)), Ref(d.buffer, region_indices(d, ix))
        if d.buffer.scope == "shared":
            cp = I.CpAsyncPipelinedZfill if op.mode == "async" else I.CpAsyncZfill
            return I.evaluate(cp(nbytes), dref, sref, span=op.span)
        t = s.buffer.dtype
        if t.packed:   # int4: the vector's whole bytes (its start and length are even: _strided_vector_width)
            return I.evaluate(I.VecStore(dt.int8, dt.int8, vec * t.bits // 8), dref, sref, span=op.span)
        return I.evaluate(I.VecStore(t, t, vec), dref, sref, span=op.span)
    loops = ctx.strided(tuple(shape), body, op.span)
    if d.buffer.scope == "shared" and op.mode != "async":
        return seq(loops, I.evaluate(I.CpAsyncCommit()), I.evaluate(I.CpAsyncWaitAll()))
    return loops


def keep_last(frag: Region) -> bool:
    return frag.buffer.shape[-1] > 1


def _vector_copy(lay, reg, into_frag: bool, other: Region, keep, vec, ctx: Ctx, span):
    g = ctx.var("g")
    r = binary("*", g, vec)
    coords = ctx.coords(lay, r)
    oidx = region_indices(other, [coords[k] for k in keep])
    if into_frag:
        body = I.evaluate(I.VecLoadZfill(reg.dtype, other.buffer.dtype, vec), Ref(reg, (r,)), Ref(other.buffer, oidx),
                          span=span)
    else:
        body = I.evaluate(I.VecStore(other.buffer.dtype, reg.dtype, vec), Ref(other.buffer, oidx), Ref(reg, (r,)),
                          span=span)
    ok = ctx.valid(lay, coords)
    return For(g, const(0), const(lay.num_regs // vec), "unroll", body if ok is None else If(ok, body), span=span)


@register(Fill)
def lower_fill(op: Fill, ctx: Ctx):
    b = op.dst.buffer
    if b.scope == "fragment":
        _whole_fragment(op.dst, "T.fill", op.span)
        reg = ctx.reg(b)
        return ctx.per_slot(ctx.layout(b, op.span), lambda r, _: Store(reg, (r,), op.value), op.span)
    if b.scope in ("local", "var"):
        v = ctx.var("i")
        return For(v, const(0), const(b.numel), "unroll", Store(b, (v,) if b.ndim == 1 else None, op.value))
    shape = op.dst.squeezed_shape() or (1,)
    squeeze = not op.dst.squeezed_shape()
    return ctx.strided(shape, lambda ix: Store(b, region_indices(op.dst, [] if squeeze else ix), op.value), op.span)


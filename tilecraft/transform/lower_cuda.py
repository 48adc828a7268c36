"""Lower tile operations and `T.Parallel` loops to per-thread code (CUDA targets).

Before: tile ops and parallel loops over whole tiles; fragments have layouts (`infer_layouts`).
After: thread-level IR.  Every fragment becomes a per-thread register array (scope "local")
indexed by compile-time slots inside unrolled loops; each op is expressed through the thread
index `tc_tid`:

- a `T.Parallel` nest that touches a fragment runs, in each thread, over the registers of its
  anchor fragment; a nest without fragments is spread over the threads element by element;
- `T.copy` to or from a fragment walks the fragment's registers; between global and shared it
  is spread over the threads;
- `T.gemm` on tensor cores becomes a call of the header library's `tc::gemm_ss`/`gemm_rs`
  templates, other gemms a per-register dot product;
- reductions combine a thread's registers, then lanes with `__shfl_xor_sync`, then warps
  through a shared scratch buffer.
The per-op lowerings are registered by op class in `CUDA_LOWERING`.
"""
from __future__ import annotations

from ..errors import TilecraftError
from ..ir import (Alloc, AtomicAdd, Buffer, Call, Copy, Cumsum, Evaluate, Fill, For, Gemm, If,
                  Kernel, Let, Load, Mutator, Print, Reduce, Ref, Region, Store, Sync, Var, binary,
                  call, cast, const, select, seq, substitute, dtype as dt)
from ..ir.func import PrimFunc
from ..layout.fragment import FragmentLayout, mma_accumulator_layout
from .infer_layouts import loop_dims
from ..codegen.c_printer import C_TYPES as C_TYPES_REF
from .lower_tile_ops_cpu import _combine, _identity, region_indices

CUDA_LOWERING: dict = {}


def register(op_cls):
    def deco(fn):
        CUDA_LOWERING[op_cls] = fn
        return fn
    return deco


class Ctx:
    def __init__(self, kernel: Kernel, layouts: dict, plans: dict, swizzled: set):
        self.kernel = kernel
        self.threads = kernel.num_threads
        self.tid = Var("tc_tid")
        self.layouts = layouts
        self.plans = plans
        self.swizzled = swizzled
        self.regs: dict = {}
        self.n = 0

    def var(self, base="r") -> Var:
        self.n += 1
        return Var(f"{base}{self.n}")

    def reg(self, frag: Buffer) -> Buffer:
        r = self.regs.get(frag)
        if r is None:
            lay = self.layout(frag, None)
            r = self.regs[frag] = Buffer(frag.name, (lay.num_regs,), frag.dtype, "local", span=frag.span)
        return r

    def layout(self, frag: Buffer, span) -> FragmentLayout:
        lay = self.layouts.get(frag)
        if lay is None:
            raise TilecraftError(f"fragment {frag.name} has no register layout", span)
        return lay

    def digit(self, lay: FragmentLayout, name: str, r):
        """The value of one digit: from the thread index or from the register slot `r`."""
        d = lay.digit(name)
        if lay.is_thread_digit(name):
            stride, value, total = lay.thread_stride(name), self.tid, self.threads
        else:
            stride, value, total = lay.reg_stride(name), r, lay.num_regs
        v = binary("//", value, stride) if stride > 1 else value
        return v if stride * d.extent >= total else binary("%", v, d.extent)

    def coords(self, lay: FragmentLayout, r) -> list:
        out = []
        for c in lay.coords:
            total = const(0)
            for name, coef in c:
                total = binary("+", total, binary("*", self.digit(lay, name, r), coef))
            out.append(total)
        return out

    def strided(self, shape, body_fn, span=None):
        """Spread the elements of `shape` (row-major) over the block's threads."""
        total = 1
        for s in shape:
            total *= s
        t = self.threads
        iters = -(-total // t)
        v = self.var("e")
        e = binary("+", binary("*", v, t), self.tid) if iters > 1 else self.tid
        idx, rest = [], e
        for k, s in enumerate(shape):
            inner = 1
            for s2 in shape[k + 1:]:
                inner *= s2
            x = binary("//", e, inner) if inner > 1 else e
            idx.append(binary("%", x, s) if k > 0 else x)
        body = body_fn(idx)
        if total % t:
            body = If(binary("<", e, total), body)
        if iters == 1:
            return body
        return For(v, const(0), const(iters), "unroll" if iters <= 16 else "serial", body, span=span)

    def first_replica(self, lay: FragmentLayout, stmt):
        """Run `stmt` only in the threads holding the first copy of a replicated layout (thread
        digits no coordinate uses): side effects such as atomics must happen once per element."""
        used = set()
        for c in lay.coords:
            used |= {n for n, _ in c}
        cond = None
        for d in lay.thread_digits:
            if d.name not in used:
                c = binary("==", self.digit(lay, d.name, None), 0)
                cond = c if cond is None else binary("and", cond, c)
        return stmt if cond is None else If(cond, stmt)

    def valid(self, lay: FragmentLayout, coords):
        """For a padded layout: the condition that `coords` are inside the tile (None if always)."""
        cond = None
        for d in lay.padded_dims():
            c = binary("<", coords[d], lay.shape[d])
            cond = c if cond is None else binary("and", cond, c)
        return cond

    def per_slot(self, lay: FragmentLayout, body_fn, span=None):
        r = self.var("r")
        coords = self.coords(lay, r)
        body = body_fn(r, coords)
        ok = self.valid(lay, coords)
        return For(r, const(0), const(lay.num_regs), "unroll", body if ok is None else If(ok, body), span=span)


# ---- tile ops -----------------------------------------------------------------------------------

def _whole_fragment(region: Region, what, span):
    if not region.covers_whole():
        raise TilecraftError(f"{what}: a part of fragment {region.buffer.name} cannot be used here on the "
                             f"CUDA target yet; use the whole fragment", span)


@register(Copy)
def lower_copy(op: Copy, ctx: Ctx):
    s, d = op.src, op.dst
    if s.buffer.scope == "fragment" and d.buffer.scope == "fragment":
        _whole_fragment(s, "T.copy", op.span)
        _whole_fragment(d, "T.copy", op.span)
        ls, ld = ctx.layout(s.buffer, op.span), ctx.layout(d.buffer, op.span)
        if not ls.same_as(ld):
            raise TilecraftError(f"T.copy between fragments {s.buffer.name} and {d.buffer.name} with different "
                                 f"register layouts is not supported on CUDA yet", op.span)
        rs, rd = ctx.reg(s.buffer), ctx.reg(d.buffer)
        return ctx.per_slot(ls, lambda r, _: Store(rd, (r,), cast(Load(rs, (r,)), rd.dtype)), op.span)
    if d.buffer.scope == "fragment" or s.buffer.scope == "fragment":
        frag, other = (d, s) if d.buffer.scope == "fragment" else (s, d)
        _whole_fragment(frag, "T.copy", op.span)
        lay = ctx.layout(frag.buffer, op.span)
        reg = ctx.reg(frag.buffer)
        keep = [k for k, n in enumerate(frag.buffer.shape) if n != 1]
        vec = _vector_width(lay, frag, other, ctx)
        if vec > 1:
            return _vector_copy(lay, reg, frag is d, other, keep, vec, ctx, op.span)

        def body(r, coords):
            tile = [coords[k] for k in keep]
            oidx = region_indices(other, tile)
            if frag is d:
                return Store(reg, (r,), cast(Load(other.buffer, oidx), reg.dtype))
            return Store(other.buffer, oidx, cast(Load(reg, (r,)), other.buffer.dtype))
        return ctx.per_slot(lay, body, op.span)
    vec = _strided_vector_width(s, d)
    if vec > 1:
        return _strided_vector_copy(op, vec, ctx)
    shape = s.squeezed_shape() or (1,)
    squeeze = not s.squeezed_shape()
    return ctx.strided(shape, lambda ix: Store(
        d.buffer, region_indices(d, [] if squeeze else ix),
        cast(Load(s.buffer, region_indices(s, [] if squeeze else ix)), d.buffer.dtype)), op.span)


def _vector_width(lay: FragmentLayout, frag: Region, other: Region, ctx: Ctx) -> int:
    """How many consecutive fragment registers map to consecutive, aligned elements of `other`
    (so one 4/8/16-byte access moves them); 1 when that cannot be proved."""
    from ..ir.analysis import divisible
    if not lay.reg_digits or not keep_last(frag) or other.buffer.scope not in ("global", "shared"):
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
    from ..ir.analysis import divisible
    pair = {s.buffer.scope, d.buffer.scope}
    if pair != {"global", "shared"} or s.buffer.dtype is not d.buffer.dtype:
        return 1
    for r in (s, d):
        nu = [k for k, n in enumerate(r.extents) if n != 1]
        if not nu or nu[-1] != r.buffer.ndim - 1 or not isinstance(r.buffer.shape[-1], int):
            return 1
    if s.extents[-1] != d.extents[-1]:
        return 1
    v = 16 // s.buffer.dtype.bytes
    while v > 1:
        if all(r.extents[-1] % v == 0 and r.buffer.shape[-1] % v == 0 and divisible(r.starts[-1], v)
               for r in (s, d)):
            return v
        v //= 2
    return 1


def _strided_vector_copy(op: Copy, vec: int, ctx: Ctx):
    s, d = op.src, op.dst
    shape = list(s.squeezed_shape())
    shape[-1] //= vec
    nbytes = vec * s.buffer.dtype.bytes

    def body(ix):
        ix = list(ix[:-1]) + [binary("*", ix[-1], vec)]
        sref, dref = Ref(s.buffer, region_indices(s, ix)), Ref(d.buffer, region_indices(d, ix))
        if d.buffer.scope == "shared":
            name = "tc::cp_async_pipelined_zfill" if op.mode == "async" else "tc::cp_async_zfill"
            return Evaluate(Call(f"{name}<{nbytes}>", (dref, sref), dt.int32), span=op.span)
        t = C_TYPES_REF[s.buffer.dtype.name]
        return Evaluate(Call(f"tc::vec_store<{t}, {t}, {vec}>", (dref, sref), dt.int32), span=op.span)
    loops = ctx.strided(tuple(shape), body, op.span)
    if d.buffer.scope == "shared" and op.mode != "async":
        return seq(loops, Evaluate(Call("tc::cp_async_commit", (), dt.int32)),
                   Evaluate(Call("tc::cp_async_wait_all", (), dt.int32)))
    return loops


def keep_last(frag: Region) -> bool:
    return frag.buffer.shape[-1] > 1


def _vector_copy(lay, reg, into_frag: bool, other: Region, keep, vec, ctx: Ctx, span):
    g = ctx.var("g")
    r = binary("*", g, vec)
    coords = ctx.coords(lay, r)
    oidx = region_indices(other, [coords[k] for k in keep])
    src_t, dst_t = (other.buffer, reg) if into_frag else (reg, other.buffer)
    from ..codegen.c_printer import C_TYPES
    tname = lambda b: C_TYPES[b.dtype.name]  # noqa: E731
    if into_frag:
        call = Call(f"tc::vec_load_zfill<{tname(reg)}, {tname(other.buffer)}, {vec}>",
                    (Ref(reg, (r,)), Ref(other.buffer, oidx)), dt.int32)
    else:
        call = Call(f"tc::vec_store<{tname(other.buffer)}, {tname(reg)}, {vec}>",
                    (Ref(other.buffer, oidx), Ref(reg, (r,))), dt.int32)
    body = Evaluate(call, span=span)
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


@register(Gemm)
def lower_gemm(g: Gemm, ctx: Ctx):
    m, n, k = g.mnk
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
    plan = ctx.plans.get(g)
    if plan is not None:
        wm, wn = plan
        t = "tc::half_t" if g.a.buffer.dtype.name == "float16" else "tc::bfloat16_t"
        swz_b = int(g.b.buffer in ctx.swizzled)
        b_ref = Ref(g.b.buffer, g.b.starts)
        if g.a.buffer.scope == "fragment":
            expect = mma_accumulator_layout((m, k), ctx.threads, wm, 1) if wn == 1 else None
            lay = ctx.layout(g.a.buffer, g.span)
            if expect is None or not lay.same_as(expect):
                warps = ctx.threads // 32
                raise TilecraftError(
                    f"T.gemm: A operand {g.a.buffer.name} is a fragment whose register layout is not the "
                    f"tensor-core A layout this gemm needs; produce it from a T.gemm accumulator with the "
                    f"same block_M and warps along M only (policy=T.GemmWarpPolicy.FullRow). With {ctx.threads} "
                    f"threads the {m} rows must split over {warps} warps of 16 rows each"
                    + (f": use threads <= {max(32, m // 16 * 32)} for block_M={m}" if m < 16 * warps else ""), g.span)
            name = f"tc::gemm_rs<{m}, {n}, {k}, {wm}, {wn}, {str(g.trans_b).lower()}, {swz_b}, {t}>"
            c = Call(name, (Ref(ctx.reg(g.a.buffer), (const(0),)), b_ref, Ref(c_reg, (const(0),))), dt.int32)
        else:
            swz_a = int(g.a.buffer in ctx.swizzled)
            name = (f"tc::gemm_ss<{m}, {n}, {k}, {wm}, {wn}, {str(g.trans_a).lower()}, "
                    f"{str(g.trans_b).lower()}, {swz_a}, {swz_b}, {t}>")
            c = Call(name, (Ref(g.a.buffer, g.a.starts), b_ref, Ref(c_reg, (const(0),))), dt.int32)
        return seq(pre, Evaluate(c, span=g.span))
    for x, what in ((g.a, "A"), (g.b, "B")):
        if x.buffer.scope == "fragment":
            raise TilecraftError(f"T.gemm: operand {what} ({x.buffer.name}, {x.buffer.dtype}) in registers needs "
                                 f"the tensor-core path (float16/bfloat16 inputs, float32 accumulator, tile sizes "
                                 f"that split into 16x8 warp tiles); put it in shared memory instead", g.span)
    lay = ctx.layout(g.c.buffer, g.span)
    acc_t = dt.float64 if c_reg.dtype is dt.float64 else dt.float32 if c_reg.dtype.is_float else c_reg.dtype

    def body(r, coords):
        i, j = coords
        kk = ctx.var("k")
        acc = Buffer(f"acc{kk.name}", (1,), acc_t, "local")
        a = Load(g.a.buffer, region_indices(g.a, [kk, i] if g.trans_a else [i, kk]))
        b = Load(g.b.buffer, region_indices(g.b, [j, kk] if g.trans_b else [kk, j]))
        a0 = Load(acc, (const(0),))
        return seq(Alloc(acc), Store(acc, (const(0),), cast(Load(c_reg, (r,)), acc_t)),
                   For(kk, const(0), const(k), "serial",
                       Store(acc, (const(0),), binary("+", a0, binary("*", cast(a, acc_t), cast(b, acc_t))))),
                   Store(c_reg, (r,), cast(a0, c_reg.dtype)))
    return seq(pre, ctx.per_slot(lay, body, g.span))


@register(Reduce)
def lower_reduce(op: Reduce, ctx: Ctx):
    src, dst = op.src, op.dst
    if dst.scope != "fragment":
        raise TilecraftError(f"T.reduce_{op.kind}: on CUDA the destination must be a fragment", op.span)
    if dst.ndim == src.ndim and src.ndim > 1:
        raise TilecraftError(f"T.reduce_{op.kind}: a destination that keeps the reduced dimension is not "
                             f"supported on CUDA yet; give {dst.name} shape {tuple(s for i, s in enumerate(src.shape) if i != op.dim)}",
                             op.span)
    acc_t = dt.float32 if src.dtype.is_float and src.dtype.bits < 32 else src.dtype
    dlay = ctx.layout(dst, op.span)
    dreg = ctx.reg(dst)
    if src.scope != "fragment":  # a shared tile: every thread reduces its own rows serially
        def body(r, coords):
            kk = ctx.var("k")
            acc = Buffer(f"acc{kk.name}", (1,), acc_t, "local")
            full = list(coords[:op.dim]) + [kk] + list(coords[op.dim:])
            a0 = Load(acc, (const(0),))
            fin = cast(a0, dst.dtype) if op.clear else cast(_combine(op.kind if op.kind not in ("abssum", "absmax")
                                                                     else op.kind[3:], cast(Load(dreg, (r,)), acc_t), a0), dst.dtype)
            return seq(Alloc(acc), Store(acc, (const(0),), _identity(op.kind, acc_t)),
                       For(kk, const(0), const(src.shape[op.dim]), "serial",
                           Store(acc, (const(0),), _combine(op.kind, a0, cast(Load(src, tuple(full)), acc_t)))),
                       Store(dreg, (r,), fin))
        return ctx.per_slot(dlay, body, op.span)
    slay = ctx.layout(src, op.span)
    sreg = ctx.reg(src)
    red_names = slay.uses(op.dim)
    # 1. within the thread: fold the registers that differ only in reduced digits
    groups: dict = {}
    for slot in range(slay.num_regs):
        vals = slay.reg_values(slot)
        key = dlay.slot_of({d.name: vals[d.name] for d in dlay.reg_digits})
        groups.setdefault(key, []).append(slot)
    accs = [Var(f"red{ctx.var().name}_{s}", acc_t) for s in range(dlay.num_regs)]
    stmts = []
    base_kind = {"abssum": "sum", "absmax": "max"}.get(op.kind, op.kind)
    for s, acc in enumerate(accs):
        # a balanced tree: shallow expressions and independent operations for the scheduler
        vals = []
        for slot in groups.get(s, []):
            v = cast(Load(sreg, (const(slot),)), acc_t)
            if op.kind in ("abssum", "absmax"):
                v = call("abs", v)
            # padding registers contribute the identity (after abs: -inf must not become +inf)
            ok = ctx.valid(slay, ctx.coords(slay, const(slot)))
            vals.append(v if ok is None else select(ok, v, _identity(op.kind, acc_t)))
        while len(vals) > 1:
            vals = [_combine(base_kind, vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i]
                    for i in range(0, len(vals), 2)]
        stmts.append(Let(acc, vals[0] if vals else _identity(op.kind, acc_t)))
    # 2. across lanes (xor butterflies on the reduced thread digits' lane bits), 3. across warps
    lane_masks, warp_digits = [], []
    for name in red_names:
        if not slay.is_thread_digit(name):
            continue
        stride, ext = slay.thread_stride(name), slay.digit(name).extent
        if stride & (stride - 1) or ext & (ext - 1):
            raise TilecraftError(f"T.reduce_{op.kind}: the thread layout of {src.name} is not a power-of-two "
                                 f"split; use power-of-two tile sizes and thread counts", op.span)
        bit = stride
        while bit < stride * ext:
            if bit < 32:
                lane_masks.append(bit)
            else:
                warp_digits.append(bit)
            bit *= 2
    op_name = {"sum": "tc::SumOp", "max": "tc::MaxOp", "min": "tc::MinOp"}[base_kind]
    cur = list(accs)
    if lane_masks:
        masks = ", ".join(str(m) for m in lane_masks)
        for s in range(len(cur)):
            nv = Var(f"{cur[s].name}_w", acc_t)
            stmts.append(Let(nv, Call(f"tc::shfl_xor_reduce<{op_name}, {masks}>", (cur[s],), acc_t)))
            cur[s] = nv
    if warp_digits:
        nd = len(cur)
        scratch = Buffer(f"tc_red{ctx.var().name}", (ctx.threads * nd,), acc_t, "shared")
        stmts.append(Alloc(scratch))
        stmts.append(Sync())
        for s in range(nd):
            stmts.append(Store(scratch, (binary("+", binary("*", ctx.tid, nd), s),), cur[s]))
        stmts.append(Sync())
        bits_mask = 0
        for b in warp_digits:
            bits_mask |= b
        others = [x for x in range(ctx.threads) if x & ~bits_mask == 0]  # values of the warp bits
        base_tid = binary("&", ctx.tid, ~bits_mask & 0x7fffffff)
        for s in range(nd):
            value = _identity(base_kind, acc_t)
            for w in others:
                partner = binary("|", base_tid, w)
                value = _combine(base_kind, value, Load(scratch, (binary("+", binary("*", partner, nd), s),)))
            nv = Var(f"{cur[s].name}_b", acc_t)
            stmts.append(Let(nv, value))
            cur[s] = nv
        stmts.append(Sync())
    for s in range(len(cur)):
        v = cur[s] if op.clear else _combine(base_kind, cast(Load(dreg, (const(s),)), acc_t), cur[s])
        stmts.append(Store(dreg, (const(s),), cast(v, dst.dtype)))
    return seq(*stmts)


@register(AtomicAdd)
def lower_atomic(op: AtomicAdd, ctx: Ctx):
    fn = f"tc::atomic_{op.kind}"
    if not isinstance(op.value, Region):
        return Evaluate(Call(fn, (Ref(op.dst.buffer, op.dst.starts), op.value), dt.int32), span=op.span)
    v = op.value
    if v.buffer.scope == "fragment":
        _whole_fragment(v, "T.atomic_add", op.span)
        reg = ctx.reg(v.buffer)
        lay = ctx.layout(v.buffer, op.span)
        keep = [k for k, n in enumerate(v.buffer.shape) if n != 1]
        loop = ctx.per_slot(lay, lambda r, co: Evaluate(Call(fn, (
            Ref(op.dst.buffer, region_indices(op.dst, [co[k] for k in keep])),
            cast(Load(reg, (r,)), op.dst.buffer.dtype)), dt.int32)), op.span)
        return ctx.first_replica(lay, loop)
    shape = v.squeezed_shape() or (1,)
    sq = not v.squeezed_shape()
    return ctx.strided(shape, lambda ix: Evaluate(Call(fn, (
        Ref(op.dst.buffer, region_indices(op.dst, [] if sq else ix)),
        cast(Load(v.buffer, region_indices(v, [] if sq else ix)), op.dst.buffer.dtype)), dt.int32)), op.span)


@register(Cumsum)
def lower_cumsum(op: Cumsum, ctx: Ctx):
    if op.src.scope != "shared" or op.dst.scope != "shared":
        raise TilecraftError("T.cumsum on CUDA supports shared tiles only for now", op.span)
    from .lower_tile_ops_cpu import _Names, lower_cumsum as cpu_scan
    serial = cpu_scan(op, _Names())
    return seq(Sync(), If(binary("==", ctx.tid, 0), serial), Sync())


@register(Print)
def lower_print(op: Print, ctx: Ctx):
    if isinstance(op.value, Buffer):
        b = op.value
        if b.scope == "fragment":
            reg = ctx.reg(b)
            return ctx.per_slot(ctx.layout(b, op.span), lambda r, co: Evaluate(Call(
                "tc::print_elem", (op.msg or b.name, Load(reg, (r,))) + tuple(co), dt.int32)), op.span)
        from .lower_tile_ops_cpu import _Names, lower_print as cpu_print
        return If(binary("==", ctx.tid, 0), cpu_print(op, _Names()))
    return If(binary("==", ctx.tid, 0), Evaluate(Call("tc::print", (op.msg, op.value), dt.int32), span=op.span))


# ---- parallel loops and the driver ---------------------------------------------------------------

class _Lower(Mutator):
    def __init__(self, layouts, plans, swizzled):
        super().__init__()
        self.layouts, self.plans, self.swizzled = layouts, plans, swizzled
        self.ctx: Ctx | None = None

    def visit_Kernel(self, k: Kernel):
        self.ctx = Ctx(k, self.layouts, self.plans, self.swizzled)
        out = Mutator.generic(self, k)
        return out

    def visit_Alloc(self, a: Alloc):
        if a.buffer.scope == "fragment":
            return Alloc(self.ctx.reg(a.buffer), span=a.span)
        return a

    def generic(self, node):
        fn = CUDA_LOWERING.get(type(node))
        if fn is not None:
            return fn(node, self.ctx)
        return Mutator.generic(self, node)

    def visit_For(self, f: For):
        if f.kind != "parallel":
            return Mutator.generic(self, f)
        ctx = self.ctx
        vars_, extents, cur = [], [], f
        while isinstance(cur, For) and cur.kind == "parallel":
            vars_.append(cur.var)
            extents.append(cur.extent.value)
            cur = cur.body
        inner = self.visit(cur)  # lowers tile ops nested in the loop body, if any
        accesses = [(n.buffer, n.indices) for n in _frag_accesses(inner)]
        anchor = None
        for buf, idx in accesses:
            dims = loop_dims(idx, vars_)
            if dims is not None and len(set(dims)) == len(vars_) == len(dims):
                anchor = (buf, dims)
                break
        if anchor is None:
            if accesses:
                names = sorted({b.name for b, _ in accesses})
                raise TilecraftError(
                    f"this T.Parallel loop reads or writes fragment(s) {', '.join(names)} but none of them is "
                    f"indexed by all the loop variables ({', '.join(v.name for v in vars_)}), so the compiler "
                    f"cannot tell which thread owns each element", f.span,
                    hint="index a fragment of the loop's full shape with exactly the loop variables")
            return ctx.strided(extents, lambda ix: substitute(inner, dict(zip(vars_, ix))), f.span)
        abuf, adims = anchor
        full = ctx.layout(abuf, f.span)
        order = [adims.index(k) for k in range(len(vars_))]
        base = FragmentLayout(tuple(extents), full.threads, full.thread_digits, full.reg_digits,
                              tuple(full.coords[o] for o in order))
        r = ctx.var("r")
        body = _FragRewrite(ctx, base, vars_, r, f.span).visit(inner)
        coords = ctx.coords(base, r)
        body = substitute(body, dict(zip(vars_, coords)))
        ok = ctx.valid(base, coords)
        loop = For(r, const(0), const(base.num_regs), "unroll", body if ok is None else If(ok, body), span=f.span)
        if any(getattr(e.value, "op", "").startswith("tc::atomic") for e in _evaluates(body)):
            loop = ctx.first_replica(base, loop)  # replicated threads must not add twice
        return loop


def _evaluates(node):
    from ..ir import collect
    return collect(node, lambda n: isinstance(n, Evaluate))


def _frag_accesses(node):
    from ..ir import collect
    return [n for n in collect(node, lambda n: isinstance(n, (Load, Store))) if n.buffer.scope == "fragment"]


class _FragRewrite(Mutator):
    """Inside a lowered parallel loop: fragment element accesses → register slots of slot `r`."""

    def __init__(self, ctx, base, vars_, r, span):
        super().__init__()
        self.ctx, self.base, self.vars, self.r, self.span = ctx, base, vars_, r, span

    def slot(self, buf, indices):
        dims = loop_dims(indices, self.vars)
        lay = self.ctx.layout(buf, self.span)
        if dims is None or not lay.same_as(self.base.project(dims)):
            raise TilecraftError(
                f"fragment {buf.name} is indexed in this T.Parallel loop in a way that does not match the "
                f"register layout of the loop (indices must be loop variables, and {buf.name} must be laid out "
                f"like the loop's other fragments)", self.span)
        slot = const(0)
        for d in lay.reg_digits:
            v = binary("%", binary("//", self.r, self.base.reg_stride(d.name)), d.extent)
            slot = binary("+", slot, binary("*", v, lay.reg_stride(d.name)))
        return (slot,)

    def visit_Load(self, e: Load):
        if e.buffer.scope == "fragment":
            return Load(self.ctx.reg(e.buffer), self.slot(e.buffer, e.indices), span=e.span)
        return Mutator.generic(self, e)

    def visit_Store(self, s: Store):
        if s.buffer.scope == "fragment":
            return Store(self.ctx.reg(s.buffer), self.slot(s.buffer, s.indices), self.visit(s.value), span=s.span)
        return Mutator.generic(self, s)


def lower_cuda(func: PrimFunc, target) -> PrimFunc:
    layouts = func.attr("fragment_layouts", {})
    plans = func.attr("gemm_plans", {})
    swizzled = func.attr("swizzled", set())
    lowered = _Lower(layouts, plans, swizzled).visit(func.body)
    leftovers = _frag_accesses(lowered)
    if leftovers:
        b = leftovers[0]
        raise TilecraftError(f"fragment {b.buffer.name} is accessed outside a T.Parallel loop; on the CUDA "
                             f"target fragment elements live in different threads — use T.Parallel, or "
                             f"T.alloc_var / T.alloc_local for per-thread values", b.span)
    return func.with_body(lowered)

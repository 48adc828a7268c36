"""CUDA lowering of reductions: registers, then lanes (xor shuffles), then warps (shared scratch)."""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import (Alloc, Buffer, For, If, Let, Load, Reduce, Ref, Store, Var, binary,
                   call, cast, const, select, seq)
from ...ir import intrinsics as I
from ...ir.semantics import (reduce_base_kind, reduce_combine as _combine, reduce_identity as _identity,
                             scan_accumulator_dtype)
from .ctx import Ctx, register


@register(Reduce)
def lower_reduce(op: Reduce, ctx: Ctx):
    src, dst = op.src, op.dst
    if dst.scope != "fragment":
        raise TilecraftError(f"T.reduce_{op.kind}: on CUDA the destination must be a fragment", op.span)
    if dst.ndim == src.ndim and src.ndim > 1:
        raise TilecraftError(f"T.reduce_{op.kind}: a destination that keeps the reduced dimension is not "
                             f"supported on CUDA yet; give {dst.name} shape {tuple(s for i, s in enumerate(src.shape) if i != op.dim)}",
                             op.span)
    acc_t = scan_accumulator_dtype(src.dtype)
    dlay = ctx.layout(dst, op.span)
    dreg = ctx.reg(dst)
    if src.scope != "fragment":  # a shared tile: every thread reduces its own rows serially
        def body(r, coords):
            kk = ctx.var("k")
            acc = Buffer(f"acc{kk.name}", (1,), acc_t, "local")
            full = list(coords[:op.dim]) + [kk] + list(coords[op.dim:])
            a0 = Load(acc, (const(0),))
            fin = cast(a0, dst.dtype) if op.clear else cast(_combine(reduce_base_kind(op.kind), cast(Load(dreg, (r,)), acc_t), a0),
                                                            dst.dtype)
            return seq(Alloc(acc), Store(acc, (const(0),), _identity(op.kind, acc_t)),
                       For(kk, const(0), const(src.shape[op.dim]), "serial",
                           Store(acc, (const(0),), _combine(op.kind, a0, cast(Load(src, tuple(full)), acc_t)))),
                       Store(dreg, (r,), fin))
        return ctx.per_slot(dlay, body, op.span)
    slay = ctx.layout(src, op.span)
    sreg = ctx.reg(src)
    red_names = slay.uses(op.dim)
    proj = slay.project([i for i in range(src.ndim) if i != op.dim])
    if not dlay.same_as(proj) and dlay.equivalent(proj):
        dlay = proj  # the same placement under the source's digit names, slot for slot
    # 1. within the thread: fold the registers that differ only in reduced digits
    groups: dict = {}
    for slot in range(slay.num_regs):
        vals = slay.reg_values(slot)
        key = dlay.slot_of({d.name: vals[d.name] for d in dlay.reg_digits})
        groups.setdefault(key, []).append(slot)
    accs = [Var(f"red{ctx.var().name}_{s}", acc_t) for s in range(dlay.num_regs)]
    stmts = []
    base_kind = reduce_base_kind(op.kind)
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
    # red_names is a set of digit names: the butterflies go in lane-bit order, not the set's
    # (string hashing differs between processes, and the order is the sum's rounding order)
    lane_masks.sort()
    cur = list(accs)
    if lane_masks:
        shfl = I.ShflXorReduce(base_kind, tuple(lane_masks))
        for s in range(len(cur)):
            nv = Var(f"{cur[s].name}_w", acc_t)
            stmts.append(Let(nv, I.call(shfl, cur[s], dtype=acc_t)))
            cur[s] = nv
    if warp_digits:
        bits_mask = 0
        for b in warp_digits:
            bits_mask |= b
        lane_bits = 0
        for b in lane_masks:
            lane_bits |= b
        stmts.extend(_across_warps(ctx, cur, acc_t, base_kind, bits_mask, lane_bits))
    for s in range(len(cur)):
        v = cur[s] if op.clear else _combine(base_kind, cast(Load(dreg, (const(s),)), acc_t), cur[s])
        stmts.append(Store(dreg, (const(s),), cast(v, dst.dtype)))
    return seq(*stmts)



def _across_warps(ctx: Ctx, cur: list, acc_t, base_kind, bits_mask: int, lane_bits: int) -> list:
    """Combine each thread's values `cur` (already reduced over the lanes `lane_bits`) across the
    warps whose thread-index bits are `bits_mask`, through a shared scratch buffer; `cur` is
    updated in place to the combined values.

    By default every thread stores its values at `tid * nd + s`.  Under shared-memory pressure
    (`ctx.compact_scratch`) only the first lane of each reduced lane group stores (the others
    hold the same values after the butterfly), at its thread index with the lane bits removed,
    so the scratch is `lane group size` times smaller."""
    nd = len(cur)
    keep = ~lane_bits if ctx.compact_scratch else -1
    width = max(ctx.threads - 1, 1).bit_length()
    slots = max(_pext_const(t, keep, width) for t in range(ctx.threads)) + 1
    scratch = Buffer(f"red_smem{ctx.var().name}", (slots * nd,), acc_t, "shared")
    ctx.scratch.add(scratch)
    out = [Alloc(scratch)]

    def at(tid, s):
        return binary("+", binary("*", _pext(tid, keep, width), nd), s)
    # no barriers here: transform/insert_syncs.py places them by address range (one between
    # these stores and the loads below; one before a later writer of the same bytes).  A thread's
    # nd (2 or 4) values go as one vector store: as nd stores, the barrier pass (buffer-granular) saw
    # each store as a write after the other threads' first store and put a barrier between them
    # (fp8 MLA decode: 2 of its 7 barriers a KV tile, ~1.5 %)
    if nd in (2, 4) and acc_t.bytes * nd <= 16:
        vals = Buffer(ctx.var("redv").name, (nd,), acc_t, "local")
        stores = [Alloc(vals), *[Store(vals, (const(s),), cur[s]) for s in range(nd)],
                  I.evaluate(I.VecStore(acc_t, acc_t, nd), Ref(scratch, (at(ctx.tid, 0),)), Ref(vals, (const(0),)))]
    else:
        stores = [Store(scratch, (at(ctx.tid, s),), cur[s]) for s in range(nd)]
    if ctx.compact_scratch and lane_bits:
        out.append(If(binary("==", binary("&", ctx.tid, lane_bits), 0), seq(*stores)))
    else:
        out.extend(stores)
    others = [x for x in range(ctx.threads) if x & ~bits_mask == 0]  # values of the warp bits
    base_tid = binary("&", ctx.tid, ~bits_mask & 0x7fffffff)
    for s in range(nd):
        value = _identity(base_kind, acc_t)
        for w in others:
            partner = binary("|", base_tid, w)
            value = _combine(base_kind, value, Load(scratch, (at(partner, s),)))
        nv = Var(f"{cur[s].name}_b", acc_t)
        out.append(Let(nv, value))
        cur[s] = nv
    return out


def _runs(mask: int, width: int) -> list:
    """The runs of set bits of `mask` below bit `width`: (lowest bit, length, output position)."""
    runs, out, b = [], 0, 0
    while b < width:
        if mask >> b & 1:
            lo = b
            while b < width and mask >> b & 1:
                b += 1
            runs.append((lo, b - lo, out))
            out += b - lo
        else:
            b += 1
    return runs


def _pext_const(x: int, mask: int, width: int) -> int:
    return sum(((x >> lo) & ((1 << n) - 1)) << o for lo, n, o in _runs(mask, width))


def _pext(e, mask: int, width: int):
    """`e` (a thread index below 2**width) with the bits outside `mask` removed; `e` itself
    when `mask` keeps every bit (the default layout's expression, unchanged)."""
    runs = _runs(mask, width)
    if runs == [(0, width, 0)]:
        return e
    out = None
    for lo, n, o in runs:
        part = binary("&", binary(">>", e, lo) if lo else e, (1 << n) - 1)
        part = binary("<<", part, o) if o else part
        out = part if out is None else binary("+", out, part)
    return out if out is not None else const(0)

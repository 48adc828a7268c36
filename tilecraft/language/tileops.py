"""Tile operations of the language: `T.copy`, `T.transpose`, `T.gemm`, `T.fill`/`T.clear`,
`T.reduce_*`, `T.atomic_*`, `T.cumsum`, `T.print`.

Each function checks its operands eagerly (shapes are static) and raises at the user's line, then
emits one tile-op statement.  Region rules for `T.copy` (SPEC §3) live in `resolve_pair`.
"""
from __future__ import annotations

from ..ir import (AtomicAdd, Buffer, Copy, Cumsum, Expr, Fill, For, Gemm, Load, Print, Reduce,
                  Region, Store, Var, as_expr, binary, cast, const, same, same_seq)
from ..ir.tileop import REDUCE_KINDS
from .builder import error, require_kernel, warn_once
from .types import GemmWarpPolicy


def _describe(x) -> str:
    if isinstance(x, Buffer):
        return f"{x.name} {tuple(x.shape)}"
    if isinstance(x, Region):
        return f"{x.buffer.name}[...] {tuple(x.extents)}"
    if isinstance(x, Load):
        return f"{x.buffer.name}[...] (a single element)"
    return repr(x)


def as_region(x, what: str) -> Region:
    if isinstance(x, Region):
        return x
    if isinstance(x, Buffer):
        if not x.is_static:
            return Region(x, tuple(const(0) for _ in x.shape), tuple(x.shape))
        return Region.whole(x)
    if isinstance(x, Load):
        return Region(x.buffer, x.indices, (1,) * len(x.indices))
    raise error(f"{what} must be a buffer, a slice of one, or an element, got {x!r}")


def expand_point(point: Load, tile_shape: tuple, other: str) -> Region:
    """`A[i, j]` against a tile of shape (m, n) means `A[i:i+m, j:j+n]`: the tile's extents are
    aligned to the trailing dimensions of the tensor; leading dimensions get extent 1."""
    buf = point.buffer
    shape = list(tile_shape)
    while len(shape) > buf.ndim and shape[0] == 1:
        shape.pop(0)
    if len(shape) > buf.ndim:
        raise error(f"T.copy: {buf.name} has {buf.ndim} dimensions but the tile {other} has "
                    f"shape {tuple(tile_shape)}; give a slice for each dimension")
    extents = (1,) * (buf.ndim - len(shape)) + tuple(shape)
    region = Region(buf, point.indices, extents)
    if buf.ndim > len(tile_shape):
        # The alignment picked which dimensions the tile spans; if one of them is smaller than the
        # extent it was given, the region can never lie inside the tensor: almost surely the
        # user meant other dimensions.  Reject rather than silently copy a wrong region.
        for d in range(buf.ndim - len(shape), buf.ndim):
            size = buf.shape[d]
            if isinstance(size, int) and extents[d] > size:
                raise error(
                    f"T.copy: the region of {buf.name} starting at the element given can never lie "
                    f"inside the tensor: dimension {d} has size {size} but the tile {other} "
                    f"(shape {tuple(tile_shape)}) gives it extent {extents[d]}",
                    hint=f"an element index takes its extents from the other side's shape, aligned "
                         f"to the last dimensions of {buf.name}{tuple(buf.shape)}; write explicit "
                         f"slices such as {buf.name}[b, s0:s1, h, :] to say which dimensions the "
                         f"tile covers")
    return region


def resolve_pair(src, dst) -> tuple[Region, Region]:
    if isinstance(src, Load) and isinstance(dst, Load):
        raise error("T.copy: both sides are single elements; one side must be a buffer or a slice "
                    "so the tile shape is known")
    if isinstance(src, Load):
        d = as_region(dst, "T.copy destination")
        s = expand_point(src, d.extents, f"{d.buffer.name}")
    elif isinstance(dst, Load):
        s = as_region(src, "T.copy source")
        d = expand_point(dst, s.extents, f"{s.buffer.name}")
    else:
        s, d = as_region(src, "T.copy source"), as_region(dst, "T.copy destination")
    if s.squeezed_shape() != d.squeezed_shape():
        raise error(f"T.copy: shapes do not match: source {_describe(s)} vs destination {_describe(d)}",
                    hint="the two sides must have the same shape once dimensions of size 1 are ignored")
    return s, d


def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None, loop_layout=None,
         annotations=None):
    """`T.copy(src, dst)`; TileLang's lowering hints (`coalesced_width`, `disable_tma`,
    `eviction_policy`, `loop_layout`, or the same keys in `annotations={...}`) never change the copy."""
    b = require_kernel("T.copy")
    if annotations is not None and not isinstance(annotations, dict):
        raise error(f"T.copy: annotations must be a dict of lowering hints, got {annotations!r}")
    for key, value in (_without_ws_id("T.copy", annotations) or {}).items():
        if key == "disable_tma" and value and not disable_tma:
            disable_tma = value
        elif key == "coalesced_width" and coalesced_width is None:
            coalesced_width = value
        elif key == "eviction_policy" and eviction_policy is None:
            eviction_policy = value
        elif key not in ("disable_tma", "coalesced_width", "eviction_policy"):
            warn_once(("T.copy", "annotations", key), f"T.copy(annotations={{{key!r}: ...}}) is ignored: a lowering "
                                                      f"hint tilecraft does not use; results do not change")
    _ignored_options("T.copy", coalesced_width=(coalesced_width, None, "tilecraft picks the vector width"),
                     eviction_policy=(eviction_policy, None, "tilecraft emits default cache hints"),
                     loop_layout=(loop_layout, None, "tilecraft maps the copy's threads itself"),
                     disable_tma=(disable_tma, False, "TMA is chosen per loop under pass_configs tc.use_tma "
                                                      "(tl.disable_tma_lower turns it off for the kernel)"))
    s, d = resolve_pair(src, dst)
    b.emit(Copy(s, d, span=b.span))


def _plane(r: Region) -> tuple:
    """The two dims of region `r` that a 2-D tile op spans (the non-unit ones, or both of a 2-D
    region), or None."""
    dims = [d for d, e in enumerate(r.extents) if e != 1]
    if len(dims) == 2:
        return tuple(dims)
    return (0, 1) if len(r.extents) == 2 else None


def transpose(src, dst):
    """dst[j, i] = src[i, j] for a 2-D tile (M, N) and a 2-D tile (N, M): shared tiles or global
    tensors (an element index takes its extents from the other side, as in T.copy).  Lowered as a
    T.Parallel loop, so it is correct wherever that loop is; register fragments are not accepted
    (their layouts are per-thread), copy them through a shared tile."""
    b = require_kernel("T.transpose")
    if isinstance(src, Load) and isinstance(dst, Load):
        raise error("T.transpose: both sides are single elements; one side must be a buffer or a slice")
    if isinstance(src, Load):
        d = as_region(dst, "T.transpose destination")
        s = expand_point(src, tuple(reversed(d.squeezed_shape())), d.buffer.name)
    elif isinstance(dst, Load):
        s = as_region(src, "T.transpose source")
        d = expand_point(dst, tuple(reversed(s.squeezed_shape())), s.buffer.name)
    else:
        s, d = as_region(src, "T.transpose source"), as_region(dst, "T.transpose destination")
    for r, what in ((s, "source"), (d, "destination")):
        if _plane(r) is None:
            raise error(f"T.transpose: the {what} {_describe(r)} must be a 2-D tile")
        if r.buffer.scope in ("fragment", "local"):
            raise error(f"T.transpose: the {what} {_describe(r)} is a register fragment; transpose shared "
                        f"tiles or global tensors", hint="T.copy the fragment into a shared tile first")
    sp, dp = _plane(s), _plane(d)
    m, n = s.extents[sp[0]], s.extents[sp[1]]
    if (d.extents[dp[0]], d.extents[dp[1]]) != (n, m):
        raise error(f"T.transpose: {_describe(d)} must have shape ({n}, {m}) to hold the transpose of "
                    f"{_describe(s)}")
    i, j = Var(b.fresh_name("ti")), Var(b.fresh_name("tj"))

    def at(r, plane, a, c):
        idx = list(r.starts)
        idx[plane[0]] = binary("+", idx[plane[0]], a)
        idx[plane[1]] = binary("+", idx[plane[1]], c)
        return tuple(idx)
    value = cast(Load(s.buffer, at(s, sp, i, j), span=b.span), d.buffer.dtype)
    store = Store(d.buffer, at(d, dp, j, i), value, span=b.span)
    b.emit(For(i, const(0), const(m), "parallel", For(j, const(0), const(n), "parallel", store, span=b.span),
               span=b.span))


def async_copy(src, dst):
    copy(src, dst)


def _gemm_operand(x, what, allowed, op="T.gemm"):
    if isinstance(x, Load):
        raise error(f"{op}: {what} must be a tile (a buffer or a slice), not a single element")
    r = as_region(x, f"{op} {what}")
    if r.buffer.scope not in allowed:
        raise error(f"{op}: {what} {r.buffer.name} is in {r.buffer.scope} memory; it must be "
                    f"{' or '.join(allowed)}",
                    hint="copy it into a T.alloc_shared / T.alloc_fragment tile first")
    if len(r.squeezed_shape()) != 2 and not (len(r.extents) == 2):
        raise error(f"{op}: {what} {_describe(r)} must be a 2-D tile")
    return r


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0, use_wgmma=None, mbar=None, annotations=None):
    """`C += op(A) @ op(B)` (C = ... with clear_accum).  C in tensor memory (T.alloc_tmem): the
    tcgen05 gemm, as TileLang dispatches it (`mbar`: the mbarrier its commit arrives on)."""
    b = require_kernel("T.gemm")
    annotations = _without_ws_id("T.gemm", annotations)
    from .tcgen05 import is_tmem, tcgen05_gemm
    if is_tmem(C):
        return tcgen05_gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum, k_pack, wg_wait, mbar=mbar,
                            annotations=annotations)
    if mbar is not None:
        raise error("T.gemm(mbar=...): the completion mbarrier belongs to a tcgen05 gemm, whose accumulator is in "
                    "tensor memory (T.alloc_tmem); this T.gemm completes before the next statement",
                    hint="drop mbar=, or accumulate into a T.alloc_tmem tile")
    _ignored_options("T.gemm", annotations=(annotations or None, None, "its keys tune the lowering"))
    _ignored_options("T.gemm", k_pack=(k_pack, 1, "k_pack packs operands for AMD matrix cores"),
                     wg_wait=(wg_wait, 0, "tilecraft's T.gemm completes before the next statement"),
                     use_wgmma=(use_wgmma, None, "wgmma is chosen per kernel with pass_configs tc.use_wgmma"))
    b.emit(gemm_stmt(A, B, C, transpose_A, transpose_B, policy, clear_accum))


def _flag(value, name: str, op_name: str) -> bool:
    """A tile op's on/off option as a Python bool: True/False, 0/1 or a numpy bool.  Anything else
    (a string such as 'no', None, 2.0) is an error, not Python's truthiness: `clear='no'` would
    otherwise mean clear=True."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise error(f"{op_name}: {name} must be True or False, got {value!r} ({type(value).__name__})")


def gemm_stmt(A, B, C, transpose_A, transpose_B, policy, clear_accum, *, op_name="T.gemm", note="",
              wgmma_requested=False):
    """The statement of `op_name(A, B, C, ...)` (T.gemm's, T.wgmma_gemm's with its plan `note`):
    `gemm_op`'s checked Gemm, or, where `clear_accum` is a kernel value (`clear_accum=(j == 0)` in
    an unrolled loop), an `if` that picks the clearing gemm or the accumulating one."""
    import dataclasses
    from ..ir import Const, If
    if isinstance(clear_accum, Const):
        clear_accum = bool(clear_accum.value)
    if isinstance(clear_accum, Expr):
        if not (clear_accum.dtype.is_bool or clear_accum.dtype.is_int):
            raise error(f"{op_name}: clear_accum must be a bool or a boolean kernel value, got {clear_accum!r} "
                        f"({clear_accum.dtype})")
        kw = dict(op_name=op_name, note=note, wgmma_requested=wgmma_requested)
        yes = gemm_stmt(A, B, C, transpose_A, transpose_B, policy, True, **kw)
        no = gemm_stmt(A, B, C, transpose_A, transpose_B, policy, False, **kw)
        return If(clear_accum, yes, no, span=require_kernel(op_name).span)
    op = gemm_op(A, B, C, transpose_A, transpose_B, policy, clear_accum, op_name=op_name)
    return dataclasses.replace(op, note=note, wgmma_requested=wgmma_requested) if note or wgmma_requested else op


def gemm_op(A, B, C, transpose_A, transpose_B, policy, clear_accum, *, op_name="T.gemm",
            c_scopes=("fragment", "local")) -> Gemm:
    """The checked `Gemm` tile op of `op_name(A, B, C, ...)` (not emitted): T.gemm's and the
    tcgen05 gemm's (language/tcgen05.py, whose accumulator may be tensor memory) shared checks."""
    b = require_kernel(op_name)
    a = _gemm_operand(A, "A", ("shared", "fragment", "local"), op_name)
    bb = _gemm_operand(B, "B", ("shared", "fragment", "local"), op_name)
    c = _gemm_operand(C, "C", c_scopes, op_name)
    pol = policy.value if isinstance(policy, GemmWarpPolicy) else str(policy)
    if pol not in ("Square", "FullRow", "FullCol"):
        raise error(f"{op_name}: unknown policy {policy!r}; use T.GemmWarpPolicy.Square/FullRow/FullCol")
    op = Gemm(a, bb, c, _flag(transpose_A, "transpose_A", op_name), _flag(transpose_B, "transpose_B", op_name),
              pol, _flag(clear_accum, "clear_accum", op_name), span=b.span)
    a2 = a.squeezed_shape() if len(a.squeezed_shape()) == 2 else a.extents
    b2 = bb.squeezed_shape() if len(bb.squeezed_shape()) == 2 else bb.extents
    c2 = c.squeezed_shape() if len(c.squeezed_shape()) == 2 else c.extents
    for r, shape in ((a, a2), (bb, b2), (c, c2)):
        if 1 in tuple(shape) or len(r.squeezed_shape()) != 2:
            raise error(f"{op_name}: {_describe(r)} has a dimension of 1 ({tuple(shape)}); {op_name} multiplies "
                        f"2-D tiles of at least 2 x 2 elements",
                        hint="a matrix-vector product: a T.Parallel loop over the products and T.reduce_sum")
    m, n, k = op.mnk
    kb = b2[1] if transpose_B else b2[0]
    ta = "transpose_A=True" if transpose_A else "A as (M, K)"
    tb = "transpose_B=True" if transpose_B else "B as (K, N)"
    if k != kb:
        raise error(f"{op_name}: tile shapes do not agree: {a.buffer.name} {tuple(a2)} and "
                    f"{bb.buffer.name} {tuple(b2)} have different K ({k} vs {kb}) with {ta}, {tb}",
                    hint="for B stored as (N, K) pass transpose_B=True")
    if tuple(c2) != (m, n):
        raise error(f"{op_name}: accumulator {c.buffer.name} has shape {tuple(c2)} but "
                    f"{a.buffer.name} @ {bb.buffer.name} is ({m}, {n})")
    if a.buffer.dtype is not bb.buffer.dtype:
        raise error(f"{op_name}: A ({a.buffer.name}) is {a.buffer.dtype} but B ({bb.buffer.name}) is "
                    f"{bb.buffer.dtype}; both operands must have the same dtype")
    return op


def fill(buffer, value, annotations=None):
    b = require_kernel("T.fill")
    _ignored_options("T.fill", annotations=(_without_ws_id("T.fill", annotations), None,
                                            "its keys tune the lowering"))
    r = as_region(buffer, "T.fill target")
    v = as_expr(value, r.buffer.dtype)
    b.emit(Fill(r, cast(v, r.buffer.dtype), span=b.span))


def clear(buffer):
    fill(buffer, 0)


def _reduce(kind, src, dst, dim, clear, batch=1, nan_propagate=False, annotations=None):
    b = require_kernel(f"T.reduce_{kind}")
    annotations = _without_ws_id(f"T.reduce_{kind}", annotations)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise error(f"T.reduce_{kind}: batch must be an int >= 1, got {batch!r}")
    _ignored_options(f"T.reduce_{kind}", batch=(batch, 1, "it groups the cross-thread all-reduces of one "
                                                    "reduction under shared barriers, a speed choice"),
                     annotations=(annotations or None, None, "its keys tune the lowering"))
    if nan_propagate and kind not in ("max", "min", "absmax"):
        raise error(f"T.reduce_{kind}: nan_propagate applies to max / min / absmax reductions only")
    for x, what in ((src, "source"), (dst, "destination")):
        if not isinstance(x, Buffer):
            raise error(f"T.reduce_{kind}: the {what} must be a whole fragment or shared buffer, got "
                        f"{_describe(x)}")
        if x.scope == "global":
            raise error(f"T.reduce_{kind}: the {what} {x.name} is a global tensor; reduce a "
                        f"fragment or shared tile")
    if kind.startswith("bit") and not (src.dtype.is_int and dst.dtype.is_int):
        raise error(f"T.reduce_{kind}: a bitwise reduction takes integer tiles, got {src.name} ({src.dtype}) -> "
                    f"{dst.name} ({dst.dtype})")
    clear = _flag(clear, "clear", f"T.reduce_{kind}")
    nd = src.ndim
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise error(f"T.reduce_{kind}: dim must be a Python int (the dimension of {src.name} to reduce), got "
                    f"{dim!r} ({type(dim).__name__})")
    d = dim + nd if dim < 0 else dim
    if not 0 <= d < nd:
        raise error(f"T.reduce_{kind}: dim={dim} is out of range for {src.name} with {nd} dimensions")
    expect = tuple(s for i, s in enumerate(src.shape) if i != d) or (1,)
    got = tuple(dst.shape)
    if got != expect and got != tuple(1 if i == d else s for i, s in enumerate(src.shape)):
        raise error(f"T.reduce_{kind}: reducing {src.name} {tuple(src.shape)} over dim {d} gives shape "
                    f"{expect}, but {dst.name} has shape {got}")
    b.emit(Reduce(kind, src, dst, d, bool(clear), span=b.span))
    if nan_propagate:
        from . import reduce_nan
        reduce_nan.emit(b, kind, src, dst, d, bool(clear))


def _reducer(kind):
    def reduce_kind(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
        _reduce(kind, buffer, out, dim, clear, batch, nan_propagate, annotations)
    reduce_kind.__name__ = reduce_kind.__qualname__ = f"reduce_{kind}"
    reduce_kind.__doc__ = f"`T.reduce_{kind}(src, dst, dim=-1, clear=True)`: dst = the {kind} of src over `dim`."
    return reduce_kind


reduce_max, reduce_min, reduce_sum = _reducer("max"), _reducer("min"), _reducer("sum")
reduce_abssum, reduce_absmax = _reducer("abssum"), _reducer("absmax")
reduce_bitand, reduce_bitor, reduce_bitxor = _reducer("bitand"), _reducer("bitor"), _reducer("bitxor")


def reduce(buffer, out, reduce_type, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    if reduce_type not in REDUCE_KINDS:
        raise error(f"T.reduce: unknown reduce_type {reduce_type!r}; expected one of {REDUCE_KINDS}")
    _reduce(reduce_type, buffer, out, dim, clear, batch, nan_propagate, annotations)


def _atomic(kind, dst, value, memory_order=None, **_):
    b = require_kernel(f"T.atomic_{kind}")
    if isinstance(value, (Buffer, Region)) or (isinstance(value, Load) and not isinstance(dst, Load)):
        if isinstance(dst, Load) and not isinstance(value, Load):
            vr = as_region(value, f"T.atomic_{kind} value")
            dr = expand_point(dst, vr.extents, vr.buffer.name)
        else:
            vr, dr = resolve_pair(value, dst)
        if dr.buffer.scope not in ("global", "shared"):
            raise error(f"T.atomic_{kind}: destination {dr.buffer.name} must be global or shared")
        b.emit(AtomicAdd(dr, vr, kind, span=b.span))
        return
    dr = as_region(dst, f"T.atomic_{kind} destination")
    if dr.buffer.scope not in ("global", "shared"):
        raise error(f"T.atomic_{kind}: destination {dr.buffer.name} must be global or shared")
    if dr.numel != 1:
        raise error(f"T.atomic_{kind}: a scalar value needs a single-element destination, got "
                    f"{_describe(dr)}")
    b.emit(AtomicAdd(dr, cast(as_expr(value, dr.buffer.dtype), dr.buffer.dtype), kind, span=b.span))


def _atomic_options(kind, memory_order, return_prev, use_tma=False):
    # use_tma needs no switch: on sm_90+ a shared tile added into global memory takes the TMA bulk
    # reduce wherever its rows allow (tc.bulk_reduce, transform/cuda_ops/misc.py), asked for or not
    _ignored_options(f"T.atomic_{kind}",
                     memory_order=(memory_order if memory_order != "relaxed" else None, None,
                                   "tilecraft's atomics are relaxed; order them with T.sync_threads"))


def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False):
    _atomic_options("add", memory_order, return_prev, use_tma)
    if return_prev:
        return _atomic_fetch("add", dst, value)
    _atomic("add", dst, value)


def atomic_max(dst, value, memory_order=None, return_prev=False):
    _atomic_options("max", memory_order, return_prev)
    if return_prev:
        return _atomic_fetch("max", dst, value)
    _atomic("max", dst, value)


def atomic_min(dst, value, memory_order=None, return_prev=False):
    _atomic_options("min", memory_order, return_prev)
    if return_prev:
        return _atomic_fetch("min", dst, value)
    _atomic("min", dst, value)


def _ordered_element(x, what, order):
    """(Ref, order number) for T.atomic_load / T.atomic_store on one 32- or 64-bit element."""
    from ..ir import Ref
    from ..ir import intrinsics as I
    dr = as_region(x, what)
    if dr.buffer.scope not in ("global", "shared"):
        raise error(f"{what}: {dr.buffer.name} must be a global or shared buffer")
    if dr.numel != 1:
        raise error(f"{what}: one element such as flag[0], got {_describe(dr)}")
    if dr.buffer.dtype.bits not in (32, 64) or dr.buffer.dtype.is_bool:
        raise error(f"{what}: {dr.buffer.name} holds {dr.buffer.dtype}; ordered loads and stores move 32- or 64-bit "
                    f"elements")
    if order not in I.ORDERS:
        raise error(f"{what}: memory_order is one of {sorted(I.ORDERS)}, got {order!r}")
    return Ref(dr.buffer, tuple(dr.starts)), I.ORDERS[order]


def atomic_load(src, memory_order="seq_cst"):
    """`T.atomic_load(flag[0], "acquire")`: the element's value, read at GPU scope with that order (a
    flag another block sets with T.atomic_store(..., "release"))."""
    from ..ir import intrinsics as I
    require_kernel("T.atomic_load")
    ref, order = _ordered_element(src, "T.atomic_load", memory_order)
    if order == 1 and memory_order == "release":
        raise error("T.atomic_load: a load cannot have release order; use acquire")
    return I.call(I.AtomicLoad(order), ref, dtype=ref.buffer.dtype)


def atomic_store(dst, value, memory_order="seq_cst"):
    """`T.atomic_store(flag[0], 1, "release")`: write the element at GPU scope with that order (every write
    of this thread before it is seen by a thread that reads the value with acquire order)."""
    from ..ir import intrinsics as I
    b = require_kernel("T.atomic_store")
    ref, order = _ordered_element(dst, "T.atomic_store", memory_order)
    if order == 1 and memory_order in ("acquire", "consume"):
        raise error(f"T.atomic_store: a store cannot have {memory_order} order; use release")
    b.emit(I.evaluate(I.AtomicStore(order), ref, cast(as_expr(value, ref.buffer.dtype), ref.buffer.dtype), span=b.span))


def _atomic_fetch(kind, dst, value):
    """`T.atomic_<kind>(dst, value, return_prev=True)`: the expression that updates one element of a
    global or shared buffer atomically and gives the value it held before (e.g. claiming a slot:
    `pos = T.atomic_add(count[0], 1, return_prev=True)`)."""
    from ..ir import Ref
    from ..ir import intrinsics as I
    b = require_kernel(f"T.atomic_{kind}")
    dr = as_region(dst, f"T.atomic_{kind} destination")
    if dr.buffer.scope not in ("global", "shared"):
        raise error(f"T.atomic_{kind}: destination {dr.buffer.name} must be global or shared")
    if dr.numel != 1 or isinstance(value, (Buffer, Region)):
        raise error(f"T.atomic_{kind}(..., return_prev=True) updates one element and returns its previous "
                    f"value; got the destination {_describe(dr)}",
                    hint="index one element, e.g. T.atomic_add(count[i], 1, return_prev=True)")
    d = dr.buffer.dtype
    return I.call(I.atomic(kind), Ref(dr.buffer, dr.starts), cast(as_expr(value, d), d), dtype=d, span=b.span)


def _without_ws_id(construct, annotations):
    """`annotations` without its `T.WSID` entry (the op's name for a warp-specialization schedule,
    language/ws_schedule.py: checked, no lowering hint), or None when nothing is left."""
    from .ws_schedule import WSID
    if not isinstance(annotations, dict) or WSID not in annotations:
        return annotations
    if not isinstance(annotations[WSID], str) or not annotations[WSID]:
        raise error(f"{construct}(annotations={{T.WSID: ...}}): the op's schedule id must be a non-empty str, "
                    f"got {annotations[WSID]!r}")
    return {k: v for k, v in annotations.items() if k != WSID} or None


def _ignored_options(construct, **options):
    """Warn once per (construct, option) for each option given a non-default value that tilecraft
    does not act on: `name=(value, default, reason)`.  None of them changes what is computed."""
    for name, (value, default, why) in options.items():
        if value is not None and not (value is default or same(value, default)):
            warn_once((construct, name), f"{construct}({name}={value!r}) is ignored: {why}; results do not change")


def cumsum(src, dst=None, dim=0, reverse=False):
    b = require_kernel("T.cumsum")
    dst = src if dst is None else dst
    for x in (src, dst):
        if not isinstance(x, Buffer) or x.scope == "global":
            raise error(f"T.cumsum: operands must be whole shared or fragment tiles, got {_describe(x)}")
    if not same_seq(src.shape, dst.shape):
        raise error(f"T.cumsum: {src.name} {tuple(src.shape)} and {dst.name} {tuple(dst.shape)} differ in shape")
    d = dim + src.ndim if dim < 0 else dim
    if not 0 <= d < src.ndim:
        raise error(f"T.cumsum: dim={dim} is out of range for {src.name}")
    b.emit(Cumsum(src, dst, d, bool(reverse), span=b.span))


def print(value, msg: str = "", warp_group_id=0, warp_id=0):  # noqa: A001 - TileLang spelling
    b = require_kernel("T.print")
    if isinstance(value, Load) or not isinstance(value, (Buffer, Expr)):
        value = as_expr(value) if not isinstance(value, Load) else value
    b.emit(Print(value, str(msg), span=b.span))

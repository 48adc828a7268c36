"""Lower every tile operation to plain loops with reference semantics (CPU target).

Before: the body may contain `Copy`, `Gemm`, `Fill`, `Reduce`, `AtomicAdd`, `Cumsum`, `Print`.
After: only loops, stores, lets, ifs and `Evaluate` of the intrinsics `atomic_<kind>` and `print`.
Each op covers its whole tile, in program order: this is the semantics every other target must
reproduce.  Global accesses are left unguarded here; `legalize_global_access` guards them next.
The lowering of each op is registered per op class in `CPU_LOWERING`.
"""
from __future__ import annotations

from ..errors import TilecraftError
from ..ir import (Alloc, AtomicAdd, Buffer, Call, Copy, Cumsum, Evaluate, Fill, For, Gemm, Kernel, Let,
                  Load, Mutator, Print, Reduce, Ref, Region, Stmt, Store, TileOp, Var, View, Visitor, binary,
                  call, cast, collect, const, seq, dtype as dt)
from ..ir import intrinsics as I
from ..ir.func import PrimFunc
from ..registry import Registry
from ..ir.semantics import (FreshVars as _Names, gemm_accumulator_dtype, reduce_combine as _combine,
                            reduce_identity as _identity, region_indices, scan_accumulator_dtype)

from ..ir.intrinsics.cpu_reduce import REDUCERS as CPU_ROW_REDUCERS

CPU_LOWERING = Registry("CPU lowering")   # tile op class -> fn(op, names) -> Stmt
register = CPU_LOWERING.register


def tile_loops(shape, names: _Names, body_fn, kind="serial", span=None):
    vars_ = [names.var() for _ in shape]
    body = body_fn(vars_)
    for v, n in reversed(list(zip(vars_, shape))):
        body = For(v, const(0), const(n), kind, body, span=span)
    return body


@register(Copy)
def lower_copy(op: Copy, names):
    shape = op.src.squeezed_shape() or (1,)
    squeeze = not op.src.squeezed_shape()

    def body(ix):
        ix = [] if squeeze else ix
        v = Load(op.src.buffer, region_indices(op.src, ix), span=op.span)
        return Store(op.dst.buffer, region_indices(op.dst, ix), cast(v, op.dst.buffer.dtype), span=op.span)
    return tile_loops(shape, names, body, span=op.span)


@register(Fill)
def lower_fill(op: Fill, names):
    shape = op.dst.squeezed_shape() or (1,)
    squeeze = not op.dst.squeezed_shape()
    return tile_loops(shape, names, lambda ix: Store(op.dst.buffer, region_indices(op.dst, [] if squeeze else ix),
                                                     op.value, span=op.span), span=op.span)


def _operand(region: Region, row, col, transposed):
    idx = [col, row] if transposed else [row, col]
    return Load(region.buffer, region_indices(region, idx))


@register(Gemm)
def lower_gemm(op: Gemm, names):
    """`C += op(A) @ op(B)`: for each C element, the products summed in k order in the accumulator
    type (float32 for any float C but float64), each step a fused multiply-add rounded to it (the
    CUDA target's fallback is this chain: NVRTC contracts its `acc + a * b` into FFMA), and C rounded
    once per T.gemm call -- a float16 / bfloat16 C is not rounded after every multiply-add (the
    CUDA target's fallback rounds once per call too; a tensor core once per k16 step).  The
    float32 cases run as one call of the CPU micro-kernel (`tc::gemm_f32acc`, same semantics)."""
    m, n, k = op.mnk
    c_buf = op.c.buffer
    acc_t = gemm_accumulator_dtype(c_buf.dtype)
    zero = None
    if op.clear_accum:
        zero = tile_loops((m, n), names, lambda ix: Store(c_buf, region_indices(op.c, ix), cast(0, c_buf.dtype)))
    fast = _micro_kernel_call(op, acc_t, names)
    if fast is not None:
        return seq(zero, fast)
    if acc_t == c_buf.dtype:
        return seq(zero, _gemm_loops(op, op.c, acc_t, names))
    # a lower-precision C: accumulate the call in an acc_t tile, round into C once at the end
    acc = Buffer(f"gacc{names.var().name}", (m, n), acc_t, "local")
    whole = Region.whole(acc)
    load = tile_loops((m, n), names, lambda ix: Store(acc, tuple(ix), cast(Load(c_buf, region_indices(op.c, ix)), acc_t)))
    back = tile_loops((m, n), names, lambda ix: Store(c_buf, region_indices(op.c, ix), cast(Load(acc, tuple(ix)), c_buf.dtype)))
    return seq(zero, Alloc(acc), load, _gemm_loops(op, whole, acc_t, names), back)


def _gemm_loops(op: Gemm, c: Region, acc_t, names):
    m, n, k = op.mnk
    if op.a.buffer.dtype == dt.bfloat16 and op.b.buffer.dtype == dt.bfloat16 and acc_t == dt.float32:
        return _bf16_gemm_loops(op, c, names)
    i, kk, j = names.var(), names.var(), names.var()
    c_idx = region_indices(c, [i, j])
    a = cast(_operand(op.a, i, kk, op.trans_a), acc_t)
    b = cast(_b_operand(op, kk, j), acc_t)
    update = Store(c.buffer, c_idx, cast(call("fma", a, b, cast(Load(c.buffer, c_idx), acc_t)), c.buffer.dtype))
    return For(i, const(0), const(m), "serial",
               For(kk, const(0), const(k), "serial", For(j, const(0), const(n), "parallel", update)))


BF16_BLOCK = 32  # k a block of the bf16 x bf16 order (tilecraft_cpu_gemm_bf16.h)


def _bf16_gemm_loops(op: Gemm, c: Region, names):
    """The micro-kernel's bf16 x bf16 order (tilecraft_cpu_gemm_bf16.h), so that a gemm sums alike whichever
    way it is lowered: per block of 32 k, the even k's products in one float32 FMA chain from +0, the odd
    k's in another (a local [2, n] tile holds row i's two chains), then C = C + (even + odd)."""
    m, n, k = op.mnk
    f32 = dt.float32
    chains = Buffer(f"gch{names.var().name}", (2, n), f32, "local")
    i = names.var()
    c_idx = lambda j: region_indices(c, [i, j])  # noqa: E731

    def block(k0, extent):
        h, j0, t, j1, j2 = (names.var() for _ in range(5))
        kk = binary("+", k0, t)
        parity = binary("%", t, const(2))
        a = cast(_operand(op.a, i, kk, op.trans_a), f32)
        b = cast(_b_operand(op, kk, j1), f32)
        zero = For(h, const(0), const(2), "serial", For(j0, const(0), const(n), "parallel",
                                                          Store(chains, (h, j0), const(0.0, f32))))
        step = For(t, const(0), const(extent), "serial", For(j1, const(0), const(n), "parallel", Store(
            chains, (parity, j1), call("fma", a, b, Load(chains, (parity, j1))))))
        total = binary("+", Load(chains, (const(0), j2)), Load(chains, (const(1), j2)))
        fold = For(j2, const(0), const(n), "parallel",
                   Store(c.buffer, c_idx(j2), binary("+", Load(c.buffer, c_idx(j2)), total)))
        return seq(zero, step, fold)

    whole, rest = divmod(k, BF16_BLOCK)
    q = names.var()
    blocks = For(q, const(0), const(whole), "serial", block(binary("*", q, const(BF16_BLOCK)), BF16_BLOCK)) \
        if whole else None
    tail = block(const(whole * BF16_BLOCK), rest) if rest else None
    return seq(Alloc(chains), For(i, const(0), const(m), "serial", seq(blocks, tail)))


def _tile_strides(region: Region):
    """(stride of the region's first non-unit dim, of its second) in elements of its row-major
    buffer; None unless the region is a 2-D tile of an on-chip buffer or of a global tensor of static
    shape (a whole k-loop's operand: transform/fuse_gemm_k_loops_cpu.py)."""
    if len(region.squeezed_shape()) != 2:
        return None
    shape = region.buffer.shape
    if not all(isinstance(s, int) for s in shape):
        return None
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return tuple(strides[d] for d, e in enumerate(region.extents) if e != 1)


def micro_kernel_operand(dtype) -> bool:
    """An A or B element type the CPU micro-kernels take: floats up to 32 bits, 8-bit integers."""
    return dtype.is_float and dtype.bits <= 32 or dtype.name in ("int8", "uint8")


def _micro_kernel_call(op: Gemm, acc_t, names):
    """`tc::gemm_f32acc(...)` when the gemm's accumulator is float32, its operands are 2-D tiles of
    distinct on-chip buffers that no T.view renames, and A and B are floats or 8-bit integers."""
    bufs = (op.a.buffer, op.b.buffer, op.c.buffer)
    if acc_t != dt.float32 or len({id(b) for b in bufs}) != 3 or any(id(b) in names.viewed for b in bufs):
        return None
    if not all(micro_kernel_operand(b.dtype) for b in bufs[:2]):
        return None
    sa, sb, sc = (_tile_strides(r) for r in (op.a, op.b, op.c))
    if sa is None or sb is None or sc is None:
        return None
    m, n, k = op.mnk
    a_strides = (sa[1], sa[0]) if op.trans_a else sa
    b_strides = (sb[1], sb[0]) if op.trans_b else sb
    kept = all(b.scope == "global" and id(b) in names.read_only for b in bufs[:2])
    intr = I.CpuGemm(m, n, k, a_strides, b_strides, sc, launch_cache=kept)
    return I.evaluate(intr, Ref(op.a.buffer, op.a.starts), Ref(op.b.buffer, op.b.starts),
                      Ref(op.c.buffer, op.c.starts), span=op.span)


def _b_operand(op: Gemm, kk, j):
    idx = [j, kk] if op.trans_b else [kk, j]
    return Load(op.b.buffer, region_indices(op.b, idx))


def _row_stride(op: Reduce, names, acc_t):
    """The element stride along the reduced dim when the reduction runs as `tc::reduce_row` calls: a
    float32-accumulated sum / abssum / max / min / absmax of a float on-chip buffer (row-major, no
    T.view renaming it); None otherwise (the loop below, which keeps its sequential order)."""
    src = op.src
    if (acc_t != dt.float32 or op.kind not in CPU_ROW_REDUCERS or src.scope == "global"
            or id(src) in names.viewed or not src.dtype.is_float or src.dtype.bits > 32
            or not all(isinstance(s, int) for s in src.shape)):
        return None
    stride = 1
    for s in src.shape[op.dim + 1:]:
        stride *= s
    return stride


@register(Reduce)
def lower_reduce(op: Reduce, names):
    """Each output element folds its row of `src` into the destination (or the identity): float32
    sums, maxima and minima as one `tc::reduce_row` call each (the header's fixed 8-lane order, which
    vectorizes), the other kinds and types as a loop in element order."""
    src, dst, d = op.src, op.dst, op.dim
    acc_t = scan_accumulator_dtype(src.dtype)
    acc = Buffer(f"red{names.var().name}", (1,), acc_t, "local")
    keep = [s for i, s in enumerate(src.shape) if i != d] or [1]
    keepdim = dst.ndim == src.ndim
    row_stride = _row_stride(op, names, acc_t)

    def body(ix):
        r = names.var()
        full = list(ix[:d]) + [r] + list(ix[d:]) if src.ndim > 1 else [r]
        out_idx = (list(ix[:d]) + [const(0)] + list(ix[d:])) if keepdim else (list(ix) if src.ndim > 1 else [const(0)])
        init = _identity(op.kind, acc_t) if op.clear else cast(Load(dst, tuple(out_idx)), acc_t)
        if row_stride is not None:
            first = list(ix[:d]) + [const(0)] + list(ix[d:]) if src.ndim > 1 else [const(0)]
            row = I.call(I.CpuReduceRow(op.kind, src.shape[d], row_stride), Ref(src, tuple(first)), init,
                         dtype=acc_t, span=op.span)
            return Store(dst, tuple(out_idx), cast(row, dst.dtype), span=op.span)
        a0 = Load(acc, (const(0),))
        return seq(
            Alloc(acc),
            Store(acc, (const(0),), init),
            For(r, const(0), const(src.shape[d]), "serial",
                Store(acc, (const(0),), _combine(op.kind, a0, cast(Load(src, tuple(full)), acc_t)))),
            Store(dst, tuple(out_idx), cast(a0, dst.dtype)),
        )
    return tile_loops(keep, names, body, span=op.span)


@register(AtomicAdd)
def lower_atomic(op: AtomicAdd, names):
    if not isinstance(op.value, Region):
        return I.evaluate(I.atomic(op.kind), Ref(op.dst.buffer, op.dst.starts), op.value, span=op.span)
    shape = op.value.squeezed_shape() or (1,)
    squeeze = not op.value.squeezed_shape()

    def body(ix):
        ix = [] if squeeze else ix
        v = cast(Load(op.value.buffer, region_indices(op.value, ix)), op.dst.buffer.dtype)
        return I.evaluate(I.atomic(op.kind), Ref(op.dst.buffer, region_indices(op.dst, ix)), v, span=op.span)
    return tile_loops(shape, names, body, span=op.span)


@register(Cumsum)
def lower_cumsum(op: Cumsum, names):
    src, dst, d = op.src, op.dst, op.dim
    acc_t = scan_accumulator_dtype(src.dtype)
    acc = Buffer(f"scan{names.var().name}", (1,), acc_t, "local")
    keep = [s for i, s in enumerate(src.shape) if i != d] or [1]
    n = src.shape[d]

    def body(ix):
        r = names.var()
        pos = binary("-", n - 1, r) if op.reverse else r
        full = tuple(list(ix[:d]) + [pos] + list(ix[d:])) if src.ndim > 1 else (pos,)
        a0 = Load(acc, (const(0),))
        return seq(Alloc(acc), Store(acc, (const(0),), cast(0, acc_t)),
                   For(r, const(0), const(n), "serial", seq(
                       Store(acc, (const(0),), binary("+", a0, cast(Load(src, full), acc_t))),
                       Store(dst, full, cast(a0, dst.dtype)))))
    return tile_loops(keep, names, body, span=op.span)


@register(Print)
def lower_print(op: Print, names):
    if isinstance(op.value, Buffer):
        buf = op.value
        return tile_loops(buf.shape, names, lambda ix: I.evaluate(
            I.PrintElem(tuple(buf.shape)), op.msg or buf.name, Load(buf, tuple(ix)), *ix), span=op.span)
    return I.evaluate(I.Print(), op.msg, op.value, span=op.span)


class _LowerNames(_Names):
    """Fresh loop variables, and what a lowering must know of the whole function: the ids of the
    buffers a T.view renames or that rename another (their bytes have two names), and of the global
    tensors the program never writes (`read_only`)."""

    def __init__(self, viewed: set, read_only: frozenset = frozenset()):
        super().__init__()
        self.viewed = viewed
        self.read_only = read_only


class _Lower(Mutator):
    def __init__(self, viewed: set, read_only: frozenset = frozenset()):
        super().__init__()
        self.names = _LowerNames(viewed, read_only)

    def generic(self, node):
        fn = CPU_LOWERING.get(type(node))
        if fn is not None:
            return fn(node, self.names)
        return Mutator.generic(self, node)


THREAD_INDEX_ON_CPU = ("thread indices (T.get_thread_binding) have no meaning on the CPU target, where "
                      "each statement covers the whole tile; use the CUDA target for thread-level code")


class _ThreadIndexUse(Visitor):
    """Finds the first statement that uses a thread index (directly or through lets bound to an
    expression of one) and raises at its span: thread Vars themselves carry no span."""

    def __init__(self):
        self.tainted: set = set()
        self.span = None
        self.first_let = None

    def _uses(self, e) -> bool:
        return bool(collect(e, lambda n: isinstance(n, Var) and n in self.tainted))

    def visit_Kernel(self, k: Kernel):
        self.tainted.update(k.thread_vars)
        self._at(k.span, self.visit, k.body)   # not the thread_vars field: only uses count

    def visit_Let(self, s: Let):
        if self._uses(s.value):   # `tx = T.get_thread_binding()`: report where tx is used
            self.tainted.add(s.var)
            self.first_let = self.first_let or s.span
            return
        self.generic(s)

    def visit_Var(self, v: Var):
        if v in self.tainted:
            raise TilecraftError(THREAD_INDEX_ON_CPU, self.span)

    def visit_IntrinsicCall(self, c):
        if c.intrinsic.thread_level:  # a warp shuffle or reduction the program wrote (language/warp.py)
            raise TilecraftError(f"{c.intrinsic.describe()}: lanes of a warp exchanging values have no meaning on "
                                 f"the CPU target, where each statement covers the whole tile; use the CUDA "
                                 f"target for warp-level code", self.span)
        self.generic(c)

    def _at(self, span, fn, node):
        saved = self.span
        self.span = span or saved
        try:
            fn(node)
        finally:
            self.span = saved

    def generic(self, node):
        if isinstance(node, Stmt):
            self._at(node.span, lambda n: Visitor.generic(self, n), node)
        else:
            Visitor.generic(self, node)


def thread_level_use(func: PrimFunc) -> TilecraftError | None:
    """The error naming the first thread-level construct this tile-level lowering cannot run (a
    thread index, a warp shuffle), or None: the CPU target then emulates the block's threads
    (transform/cpu_threads.py)."""
    checker = _ThreadIndexUse()
    try:
        checker.visit(func.body)
    except TilecraftError as e:
        return e
    if checker.first_let is not None:  # bound but never used: the binding is the culprit
        return TilecraftError(THREAD_INDEX_ON_CPU, checker.first_let)
    return None


def check_no_thread_indices(func: PrimFunc) -> None:
    err = thread_level_use(func)
    if err is not None:
        raise err


def lower_tile_ops_cpu(func: PrimFunc, ctx) -> PrimFunc:
    check_no_thread_indices(func)
    viewed = set()
    for v in collect(func.body, lambda n: isinstance(n, View)):
        viewed.update(id(b) for b in (v.buffer, v.base) if isinstance(b, Buffer))
    return func.with_body(_Lower(viewed, _read_only(func, viewed)).visit(func.body))


def _read_only(func: PrimFunc, viewed: set) -> frozenset:
    """Ids of the global tensors the program never writes: no tile op writes them, no store, and no
    address of theirs is taken (an atomic, an intrinsic, an external call could write through it), nor
    do they have a second name (T.view)."""
    written = set(viewed)
    for n in collect(func.body, lambda n: isinstance(n, (TileOp, Store, Ref))):
        if isinstance(n, TileOp):
            written.update(id(r.buffer) for r in n.writes())
        else:
            written.add(id(n.buffer))
    return frozenset(id(b) for b in func.params if b.scope == "global" and id(b) not in written)

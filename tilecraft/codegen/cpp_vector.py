"""The CPU target's hand-vectorized innermost loops (device/include/tilecraft_cpu_vec.h).

An innermost loop whose body is one store of a contiguous element, computed from contiguous
elements and loop-invariant values with float32 `+ - * /`, negation, `T.exp2` and conversions
from / to float16 and bfloat16, is printed as a loop of 16-lane vector statements followed by the
scalar loop for the remaining iterations:

    { int j = 0;
      for (; j <= 1024 - 16; j += 16) tc::vstore(&Y[i * 1024 + j], tc::vexp2(tc::vload(&X[i * 1024 + j]) - tc::vbcast(m)));
      for (; j < 1024; ++j) { <the scalar body> } }

Only where GCC's own vectorization of the scalar code is weak: a loop that converts a 16-bit float
(GCC 12 has no vector F16C conversion of a scalar loop; half_t's bit code is ~12 instructions a
value) or calls exp2 (whose scaling is one vscalefps here).  Every vector function gives, lane by
lane, the scalar code's bits (tilecraft_cpu_vec.h), and an invariant value is computed by the same
scalar expression, once per vector: the loop stores the bytes the scalar loop stores.

The iterations must not depend on each other: the stored buffer is read only at the stored element,
no buffer is renamed by a T.view (two names for the same bytes), and the body has no effects but the
store (no random draws, assertions or throwing divisions: what `CppPrinter.loop_pragma` refuses too).
"""
from __future__ import annotations

from ..ir import Store, collect
from ..ir import dtype as dt
from ..ir import expr as E
from ..ir import intrinsics as I

VL = 16                                   # lanes (tilecraft_cpu_vec.h, tc::VL)
_ARITH = ("+", "-", "*", "/")
_IO_TYPES = ("float32", "float16", "bfloat16")   # what tc::vload / tc::vstore read and write
_PURE = (E.Const, E.Var, E.Load, E.Binary, E.Unary, E.Cast, E.Select, E.Call)


def vector_loop(p, s, viewed) -> bool:
    """Print the innermost loop `s` as a vector loop and a scalar tail; False (nothing printed) when
    it does not qualify.  `viewed`: the buffers a T.view renames or that rename another."""
    body = s.body
    if (getattr(s, "step", 1) != 1 or not isinstance(body, Store) or body.buffer.dtype.name not in _IO_TYPES
            or body.buffer in viewed or not p.loop_pragma_allows(s)):
        return False
    v = s.var
    if not _contiguous(body.indices, v):
        return False
    p.nonneg.add(v)   # as visit_For: offsets print the same in the vector and the scalar statements
    st = body.buffer.dtype
    value = body.value
    if st != dt.float32:   # a 16-bit store: the float32 value rounded by the store's own conversion
        if not (isinstance(value, E.Cast) and value.value.dtype == dt.float32):
            return False
        value = value.value
    if value.dtype != dt.float32:
        return False
    vec = _Vec(p, v, body, viewed)
    text = vec.expr(value)
    if text is None or not (vec.worth or st != dt.float32):
        return False
    d = p.doc
    name, t = p.name(v), p.type_name(v.dtype)
    start, end = p.expr(s.start), p.expr(E.binary("+", s.start, s.extent))
    d.line("{")
    d.indent()
    d.line(f"{t} {name} = {start};")
    d.line(f"for (; {name} <= {end} - {VL}; {name} += {VL}) {{  // {VL} lanes (tilecraft_cpu_vec.h)")
    d.line(f"  tc::vstore(&{p.visit_Load(E.Load(body.buffer, body.indices))}, {text});")
    d.line("}")
    d.line(f"for (; {name} < {end}; ++{name}) {{")
    d.indent()
    p.stmt(body)
    d.dedent()
    d.line("}")
    d.dedent()
    d.line("}")
    return True


def _depends(e, v) -> bool:
    return bool(collect(e, lambda n: n is v))


def _contiguous(indices, v) -> bool:
    """The last index is `v`, `v + e` or `e + v` with `e` free of v; the others are free of v."""
    if not indices or any(_depends(i, v) for i in indices[:-1]):
        return False
    last = indices[-1]
    if last is v:
        return True
    return (isinstance(last, E.Binary) and last.op == "+" and
            ((last.a is v and not _depends(last.b, v)) or (last.b is v and not _depends(last.a, v))))


class _Vec:
    """The vector form of a float32 expression of the loop variable `v`, or None."""

    def __init__(self, p, v, store: Store, viewed):
        self.p, self.v, self.store, self.viewed = p, v, store, viewed
        self.at = p.offset(store.buffer, store.indices)
        self.worth = False   # a 16-bit load or an exp2: where the scalar code vectorizes poorly

    def expr(self, e):
        if not _depends(e, self.v):
            return self.invariant(e)
        if e.dtype != dt.float32:
            return None
        if isinstance(e, E.Load):
            return self.load(e)
        if isinstance(e, E.Cast):
            if isinstance(e.value, E.Load) and e.value.dtype.name in _IO_TYPES:
                self.worth |= e.value.dtype != dt.float32
                return self.load(e.value)
            return None
        if isinstance(e, E.Binary) and e.op in _ARITH and e.a.dtype == dt.float32 and e.b.dtype == dt.float32:
            a, b = self.expr(e.a), self.expr(e.b)
            return None if a is None or b is None else f"({a} {e.op} {b})"
        if isinstance(e, E.Unary) and e.op == "neg":
            a = self.expr(e.a)
            return None if a is None else f"(-{a})"
        if isinstance(e, E.Call) and e.op == "exp2" and len(e.args) == 1 and e.args[0].dtype == dt.float32:
            a = self.expr(e.args[0])
            self.worth = True
            return None if a is None else f"tc::vexp2({a})"
        return None

    def load(self, e: E.Load):
        b = e.buffer
        if b in self.viewed or not _contiguous(e.indices, self.v):
            return None
        if b is self.store.buffer and self.p.offset(b, e.indices) != self.at:
            return None   # another element of the stored buffer: iterations would depend on each other
        return f"tc::vload(&{self.p.visit_Load(e)})"

    def invariant(self, e):
        """A float32 value free of the loop variable: the scalar expression, once per vector."""
        if e.dtype != dt.float32:
            return None
        pure = collect(e, lambda n: isinstance(n, E.Expr) and not isinstance(n, _PURE)
                       or isinstance(n, I.IntrinsicCall)
                       or isinstance(n, E.Call) and n.op not in E.MATH_FUNCS
                       or isinstance(n, E.Load) and (n.buffer is self.store.buffer or n.buffer.dtype.packed))
        if pure:
            return None
        return f"tc::vbcast({self.p.expr(e)})"


def row_reductions(p, s, viewed) -> bool:
    """`for r: dst[r] = tc::reduce_row<R>(&src[r, 0], n, 1, init)` over the rows of a float32 tile
    (init the reduction's identity, or dst[r] itself), printed as one `tc::reduce_rows<R>` call: the
    same reduction of each row (tilecraft_cpu_vec.h), with the rows' sums interleaved."""
    from ..ir.intrinsics.cpu_reduce import REDUCERS
    body, v = s.body, s.var
    if (getattr(s, "step", 1) != 1 or not isinstance(body, Store) or not _is_const(s.start, 0)
            or not isinstance(s.extent, E.Const)):
        return False
    call = body.value
    while isinstance(call, E.Cast) and call.dtype == dt.float32:
        call = call.value
    if not (isinstance(call, I.IntrinsicCall) and isinstance(call.intrinsic, I.CpuReduceRow)
            and call.intrinsic.stride == 1 and call.intrinsic.kind == "sum" and call.dtype == dt.float32):
        return False
    ref, init = call.args
    src, dst, rows = ref.buffer, body.buffer, s.extent.value
    if (not isinstance(ref, E.Ref) or src is dst or src in viewed or dst in viewed
            or src.dtype != dt.float32 or dst.dtype != dt.float32 or len(src.shape) != 2
            or not all(isinstance(d, int) for d in (*src.shape, *dst.shape))
            or src.shape[0] < rows or src.shape[1] != call.intrinsic.n):
        return False
    if not (len(ref.indices) == 2 and ref.indices[0] is v and _is_const(ref.indices[1], 0)):
        return False
    if not (dst.shape in ((rows,), (rows, 1)) and body.indices[0] is v
            and all(_is_const(i, 0) for i in body.indices[1:])):
        return False
    if isinstance(init, E.Const) and init.dtype == dt.float32:
        keep, start = "false", p.expr(init)
    elif (isinstance(init, E.Load) and init.buffer is dst
          and p.offset(dst, init.indices) == p.offset(dst, body.indices)):
        keep, start = "true", "0.0f"
    else:
        return False
    p.doc.line(f"tc::reduce_rows<{REDUCERS['sum']}>({p.name(src)}, {rows}, {src.shape[1]}, {call.intrinsic.n}, "
               f"{p.name(dst)}, {keep}, {start});  // {rows} rows of tc::reduce_row, interleaved")
    return True


def _is_const(e, value) -> bool:
    return isinstance(e, E.Const) and e.value == value

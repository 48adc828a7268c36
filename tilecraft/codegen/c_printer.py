"""The shared C-family printer: thread-level IR → C++ / CUDA C++ text.

It prints only plain statements (loops, stores, lets, ifs, intrinsic calls); tile operations must
have been lowered by the target's passes first.  Targets subclass it and override the hooks
(`type_name`, `buffer_ref`, `visit_Evaluate`, ...), as a visitor dispatched by node class.
Typed intrinsic calls (ir/intrinsics) are printed by the emitter registered for their class and
the target, so the generated code calls small inline functions from the device header library
instead of pasting assembly.
"""
from __future__ import annotations

import functools

from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.buffer import Buffer
from ..ir.functor import _Dispatch
from ..ir.index_width import wide_dims, wide_offset, widen, widening_cast
from ..ir.tileop import TileOp
from .names import CNames

C_TYPES = {
    "float16": "tc::half_t", "bfloat16": "tc::bfloat16_t", "float32": "float", "float64": "double",
    "int8": "int8_t", "int16": "int16_t", "int32": "int", "int64": "int64_t", "uint8": "uint8_t",
    "uint16": "uint16_t", "uint32": "unsigned", "uint64": "uint64_t", "bool": "bool",
    "float8_e4m3fn": "tc::fp8_e4m3_t", "float8_e5m2": "tc::fp8_e5m2_t",
    # an int4 value is held sign-extended in a byte; an int4 buffer is an array of bytes, two
    # elements each (storage_len, visit_Load / visit_Store: tc::s4_get / tc::s4_set)
    "int4": "int8_t",
}


def storage_len(b: Buffer) -> int:
    """Array elements that hold `b` (a static on-chip buffer): its elements, or for int4 its bytes."""
    return (b.numel + 1) // 2 if b.dtype.packed else b.numel

_C_BINOPS = {"+": "+", "-": "-", "*": "*", "/": "/", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
             "==": "==", "!=": "!=", "and": "&&", "or": "||", "&": "&", "|": "|", "^": "^",
             "<<": "<<", ">>": ">>"}


class Doc:
    """Indented lines; cheap and enough for generated code."""

    def __init__(self):
        self.lines: list[str] = []
        self.level = 0

    def line(self, text: str = ""):
        self.lines.append(("  " * self.level + text) if text else "")

    def indent(self):
        self.level += 1

    def dedent(self):
        self.level -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def paste_imports(doc: Doc, func) -> None:
    """The program's own source texts (`T.import_source`), verbatim, before the kernel."""
    for i, text in enumerate(func.imports):
        doc.line(f"// T.import_source #{i + 1} of {func.name} (the program's own code, pasted as given)")
        doc.lines.extend(text.splitlines())
        doc.line("")


class CPrinter(_Dispatch):
    _cache: dict = {}

    def __init__(self):
        self.doc = Doc()
        self.nonneg: set = set()   # Vars known to be >= 0 (loop / block / thread indices)
        self.name = CNames()       # every Var and Buffer is printed through this: unique C names
        self.let_values: dict = {}  # let-bound Var -> its value (64-bit index arithmetic looks through lets)

    # ---- hooks ------------------------------------------------------------------------------
    def type_name(self, d: dt.DType) -> str:
        return C_TYPES[d.name]

    def buffer_ref(self, buf: Buffer, offset: str) -> str:
        return f"{self.name(buf)}[{offset}]"

    def packed_store(self, buf: Buffer) -> str:
        """The header function that writes one int4 element of `buf` (its byte holds a neighbour
        another thread may write at the same time: targets pick an atomic form where it can)."""
        return "tc::s4_set"

    def packed_address(self, buf: Buffer, indices) -> str:
        """The byte of `buf` holding the element at `indices` (an even flat index: a whole byte)."""
        return f"({self.name(buf)} + (({self.offset(buf, indices)}) >> 1))"

    def float_literal(self, value: float, d: dt.DType) -> str:
        if value != value:
            return f"tc::nan<{self.type_name(d)}>()"
        if value in (float("inf"), float("-inf")) and d.name == "float8_e4m3fn":
            value = 448.0 if value > 0 else -448.0  # no infinity: saturates, as a conversion into it does
        elif value in (float("inf"), float("-inf")):
            if value < 0 and d.bits == 8:  # 8-bit floats have no unary minus (the headers build -inf)
                return f"tc::neg_infinity<{self.type_name(d)}>()"
            s = f"tc::infinity<{self.type_name(d)}>()"
            return s if value > 0 else f"(-{s})"
        text = repr(float(value))
        if "e" not in text and "." not in text:
            text += ".0"
        if d.bits == 64:
            return text
        if d.bits == 32:
            return text + "f"
        return f"{self.type_name(d)}({text}f)"

    # ---- expressions ------------------------------------------------------------------------
    def expr(self, e) -> str:
        if isinstance(e, str):
            return '"' + e.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
        if isinstance(e, int):
            return str(e)
        return type(self)._method(type(e))(self, e)

    def generic(self, node):
        if isinstance(node, TileOp):
            raise NotImplementedError(f"tile op {type(node).__name__} reached code generation un-lowered")
        raise NotImplementedError(f"cannot print {type(node).__name__}")

    def visit_Const(self, e):
        d = e.dtype
        if d.is_bool:
            return "true" if e.value else "false"
        if d.is_float:
            return self.float_literal(e.value, d)
        if d.kind == "int" and d.bits in (32, 64) and e.value == -(1 << (d.bits - 1)):
            # the smallest value has no literal: `-2147483648` negates a long (C++), which then
            # picks no overload of tc::max(int, int); spell it as an int expression
            return f"(-{(1 << (d.bits - 1)) - 1}{'LL' if d.bits == 64 else ''} - 1)"
        if d.bits == 64:
            return f"{e.value}LL" if d.kind == "int" else f"{e.value}ULL"
        if d.kind == "uint":
            return f"{e.value}u"
        if d.bits < 32:
            return f"(({self.type_name(d)}){e.value})"
        return str(e.value)

    def visit_Var(self, e):
        return self.name(e)

    def is_nonneg(self, e) -> bool:
        if isinstance(e, E.Const):
            return e.value >= 0
        if isinstance(e, E.Var):
            return e in self.nonneg or (isinstance(e, E.BuiltinVar) and e.name == E.TID)
        if isinstance(e, E.Binary) and e.op in ("+", "*", "//", "%", "min", "max", ">>", "&"):
            return self.is_nonneg(e.a) and self.is_nonneg(e.b)
        if isinstance(e, E.Cast):
            return self.is_nonneg(e.value)
        return False

    def visit_Binary(self, e):
        a, b = self.expr(e.a), self.expr(e.b)
        if e.op in ("min", "max"):
            return f"tc::{e.op}({a}, {b})"
        if e.op in ("//", "%"):
            if e.dtype.is_float:
                return f"tc::floor{'div' if e.op == '//' else 'mod'}({a}, {b})"
            if self.is_nonneg(e.a) and self.is_nonneg(e.b):
                return f"({a} {'/' if e.op == '//' else '%'} {b})"
            return f"tc::floor{'div' if e.op == '//' else 'mod'}({a}, {b})"
        if e.op == "%" or (e.op == "/" and e.dtype.is_int):
            return f"({a} {e.op} {b})"
        if e.a.dtype.bits < 32 and e.a.dtype.is_float and e.op in ("+", "-", "*", "/"):
            # 16-bit float arithmetic: compute in float, round once to the declared type.
            return f"{self.type_name(e.dtype)}((float)({a}) {e.op} (float)({b}))"
        return f"({a} {_C_BINOPS[e.op]} {b})"

    def visit_Unary(self, e):
        a = self.expr(e.a)
        if e.op == "neg":
            if e.dtype.is_float and e.dtype.bits < 32:
                return f"{self.type_name(e.dtype)}(-(float)({a}))"
            return f"(-{a})"
        return f"(!{a})" if e.op == "not" else f"(~{a})"

    def truncmod(self, e) -> str:
        """T.truncmod: C's `%` for integers (sign of the dividend), fmod for floats."""
        a, b = e.args
        if not e.dtype.is_float:
            return f"({self.expr(a)} % {self.expr(b)})"
        if e.dtype.bits < 32:
            return f"{self.type_name(e.dtype)}(tc::fmod((float)({self.expr(a)}), (float)({self.expr(b)})))"
        return f"tc::fmod({self.expr(a)}, {self.expr(b)})"

    def visit_Call(self, e):
        if e.op == "truncmod":
            return self.truncmod(e)
        if e.op == "reinterpret":  # T.reinterpret: same-width bit copy (the headers' tc::bit_cast)
            return f"tc::bit_cast<{self.type_name(e.dtype)}>({self.expr(e.args[0])})"
        args = ", ".join(self.expr(a) for a in e.args)
        if e.op in E.MATH_FUNCS:
            if e.dtype.is_float and e.dtype.bits < 32 and e.op not in ("isnan", "isinf", "isfinite"):
                return f"{self.type_name(e.dtype)}(tc::{e.op}({', '.join(f'(float)({self.expr(a)})' for a in e.args)}))"
            return f"tc::{e.op}({args})"
        return self.intrinsic(e)

    def intrinsic(self, e) -> str:
        raise NotImplementedError(f"intrinsic {e.op} has no printer for this target")

    def widened_cast(self, e) -> str | None:
        """A cast of 32-bit index arithmetic to int64, printed as that arithmetic in int64 (no wrap
        before the cast: ir/index_width.py); None for any other cast."""
        if not widening_cast(e):
            return None
        w = widen(e.value, self.let_values)
        if isinstance(w, E.Cast) and w.value is e.value:
            return None
        return self.expr(w)

    def visit_Cast(self, e):
        wide = self.widened_cast(e)
        if wide is not None:
            return wide
        src, dst = e.value.dtype, e.dtype
        inner = self.expr(e.value)
        if src.is_float and src.bits < 32 and not (dst.is_float and dst.bits < 32):
            inner = f"(float)({inner})"
        elif dst.is_float and dst.bits < 32 and src.is_float and src.bits < 32:
            inner = f"(float)({inner})"
        if dst.packed:  # two's complement wrap into 4 bits, as a narrowing integer conversion does
            return f"tc::to_s4({inner})"
        return f"(({self.type_name(dst)})({inner}))"

    def visit_Select(self, e):
        return f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"

    def visit_Load(self, e):
        if e.buffer.dtype.packed:
            return f"tc::s4_get({self.name(e.buffer)}, {self.offset(e.buffer, e.indices)})"
        return self.buffer_ref(e.buffer, self.offset(e.buffer, e.indices))

    def offset(self, buf: Buffer, indices) -> str:
        """Row-major linear offset; 64-bit arithmetic only where the buffer may exceed 2^31 elements
        (ir/index_width.py): an index into a dimension that may is computed in int64 throughout, and
        the offset of a buffer that may is summed in int64."""
        long_dims = wide_dims(buf)
        if len(indices) == 1:
            return self.expr(widen(indices[0], self.let_values) if long_dims[0] else indices[0])
        wide = wide_offset(buf)
        terms = []
        stride_exprs = buf.strides()
        for idx, stride, long_dim in zip(indices, stride_exprs, long_dims):
            if isinstance(idx, E.Const) and idx.value == 0:
                continue
            if long_dim:
                i = self.expr(widen(idx, self.let_values))
            else:
                i = self.expr(idx)
                if wide:
                    i = f"({self.type_name(dt.int64)})({i})"
            if isinstance(stride, int):
                terms.append(i if stride == 1 else f"{i} * {stride}")
            else:
                terms.append(f"{i} * ({self.expr(stride)})")
        return " + ".join(terms) if terms else "0"

    # ---- statements -------------------------------------------------------------------------
    def stmt(self, s):
        if s is None:
            return
        type(self)._method(type(s))(self, s)

    def visit_Seq(self, s):
        for x in s.stmts:
            self.stmt(x)

    def visit_Store(self, s):
        if s.buffer.dtype.packed:
            self.doc.line(f"{self.packed_store(s.buffer)}({self.name(s.buffer)}, {self.offset(s.buffer, s.indices)}, "
                          f"{self.expr(s.value)});")
            return
        self.doc.line(f"{self.buffer_ref(s.buffer, self.offset(s.buffer, s.indices))} = {self.expr(s.value)};")

    def visit_Let(self, s):
        self.let_values[s.var] = s.value
        self.doc.line(f"const {self.type_name(s.var.dtype)} {self.name(s.var)} = {self.expr(s.value)};")

    def loop_pragma(self, s) -> str | None:
        return None

    def visit_For(self, s):
        self.nonneg.add(s.var)
        pragma = self.loop_pragma(s)
        if pragma:
            self.doc.line(pragma)
        v = self.name(s.var)
        t = self.type_name(s.var.dtype)
        self.doc.line(f"for ({t} {v} = {self.expr(s.start)}; {v} < {self.expr(E.binary('+', s.start, s.extent))}; ++{v}) {{")
        self.doc.indent()
        self.stmt(s.body)
        self.doc.dedent()
        self.doc.line("}")

    def visit_While(self, s):
        self.doc.line(f"while ({self.expr(s.cond)}) {{")
        self.doc.indent()
        self.stmt(s.body)
        self.doc.dedent()
        self.doc.line("}")

    def visit_If(self, s):
        self.doc.line(f"if ({self.expr(s.cond)}) {{")
        self.doc.indent()
        self.stmt(s.then)
        self.doc.dedent()
        if s.orelse is not None:
            self.doc.line("} else {")
            self.doc.indent()
            self.stmt(s.orelse)
            self.doc.dedent()
        self.doc.line("}")

    def visit_Break(self, s):
        self.doc.line("break;")

    def visit_Evaluate(self, s):
        self.doc.line(self.expr(s.value) + ";")

    def visit_Annotate(self, s):
        pass


@functools.lru_cache(maxsize=16)
def viewed_bases(func) -> frozenset:
    """Buffers of `func` that a T.view reinterprets with another element type (language/views.py):
    their declarations make no `__restrict__` promise and, on the CPU, are aligned for any scalar."""
    from ..ir import View, collect
    return frozenset(v.base for v in collect(func.body, lambda n: isinstance(n, View))
                     if v.base.dtype != v.buffer.dtype or v.base.scope == "shared")


def view_line(p: CPrinter, s) -> str:
    """The declaration of a `View`: the base's pointer, cast when the element type changes."""
    t = p.type_name(s.buffer.dtype)
    if not isinstance(s.base, Buffer):  # T.make_tensor: an address the program holds as an int64
        return f"{t}* {p.name(s.buffer)} = reinterpret_cast<{t}*>(static_cast<unsigned long long>({p.expr(s.base)}));  // a tensor at an address"
    if s.buffer.dtype == s.base.dtype:
        return f"{t}* {p.name(s.buffer)} = {p.name(s.base)};  // a view"
    return f"{t}* {p.name(s.buffer)} = reinterpret_cast<{t}*>({p.name(s.base)});  // a view of {s.base.dtype} bytes"

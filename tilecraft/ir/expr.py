"""Scalar expressions of the tile IR.

Expressions are typed at construction: every node has a `dtype`.  Use the `binary`, `unary`,
`call`, `cast` and `select` constructors rather than the classes: they apply TileLang's promotion
rules, fold constants and drop identities (``x * 1``, ``x + 0``) so generated code stays readable.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

from . import dtype as dt
from .dtype import DType
from .node import Node, Span


@dataclass(frozen=True, eq=False)
class Expr(Node):
    @property
    def dtype(self) -> DType:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    # Python operators build IR, so plain Python helper functions called from a kernel body
    # (`def gelu(x): return 0.5 * x * (1 + T.tanh(...))`, `T.if_then_else(s == 1, a, b)`) work on
    # kernel values, as in TileLang.  `==` / `!=` build comparisons too: the compiler compares nodes
    # by identity only (`is`, node.same / same_seq / index_of); hashing stays identity-based, so
    # dicts and sets keyed by nodes work.  Operators that Python forces to return a plain bool, int
    # or float (`bool()`, `if`, `and`/`or`/`not`, `in`, `min`/`max`, `int()`, `float()`, `math.exp`)
    # cannot build IR: they raise an error naming the helper's line and what to write instead
    # (pyops.py).
    __hash__ = Node.__hash__

    def __add__(self, o): return binary("+", self, o)
    def __radd__(self, o): return binary("+", o, self)
    def __sub__(self, o): return binary("-", self, o)
    def __rsub__(self, o): return binary("-", o, self)
    def __mul__(self, o): return binary("*", self, o)
    def __rmul__(self, o): return binary("*", o, self)
    def __truediv__(self, o): return binary("/", self, o)
    def __rtruediv__(self, o): return binary("/", o, self)
    def __floordiv__(self, o): return binary("//", self, o)
    def __rfloordiv__(self, o): return binary("//", o, self)
    def __mod__(self, o): return binary("%", self, o)
    def __rmod__(self, o): return binary("%", o, self)
    def __divmod__(self, o): return binary("//", self, o), binary("%", self, o)
    def __rdivmod__(self, o): return binary("//", o, self), binary("%", o, self)
    def __pow__(self, o, mod=None): return power(self, o, mod)
    def __rpow__(self, o, mod=None): return power(o, self, mod)
    def __lt__(self, o): return binary("<", self, o)
    def __le__(self, o): return binary("<=", self, o)
    def __gt__(self, o): return binary(">", self, o)
    def __ge__(self, o): return binary(">=", self, o)
    def __eq__(self, o): return _compare("==", self, o)
    def __ne__(self, o): return _compare("!=", self, o)
    def __and__(self, o): return binary("&" if self.dtype.is_int else "and", self, o)
    def __rand__(self, o): return binary("&" if self.dtype.is_int else "and", o, self)
    def __or__(self, o): return binary("|" if self.dtype.is_int else "or", self, o)
    def __ror__(self, o): return binary("|" if self.dtype.is_int else "or", o, self)
    def __xor__(self, o): return binary("^", self, o)
    def __rxor__(self, o): return binary("^", o, self)
    def __lshift__(self, o): return binary("<<", self, o)
    def __rlshift__(self, o): return binary("<<", o, self)
    def __rshift__(self, o): return binary(">>", self, o)
    def __rrshift__(self, o): return binary(">>", o, self)
    def __neg__(self): return unary("neg", self)
    def __invert__(self): return unary("bitnot" if self.dtype.is_int else "not", self)
    def __pos__(self): return self
    def __abs__(self): return call("abs", self)
    def __floor__(self): return call("floor", self)
    def __ceil__(self): return call("ceil", self)
    def __trunc__(self): return call("trunc", self)

    def __round__(self, ndigits=None):
        if ndigits is not None:
            from .pyops import refuse
            refuse(self, "round(x, ndigits)", "round(x) (T.round), or scale: T.round(x * 100) / 100")
        return call("round", self)

    def __bool__(self):
        from .pyops import refuse_truth
        refuse_truth(self)

    def __index__(self):
        from .pyops import refuse
        refuse(self, "a compile-time integer (range(), a shape, a list index)",
               "compute it from Python values, or use the kernel value in kernel code")

    def __int__(self):
        from .pyops import refuse
        refuse(self, "int(x)", "T.cast(x, \"int32\")")

    def __float__(self):
        from .pyops import refuse
        refuse(self, "float(x) (also math.* functions)", "T.cast(x, \"float32\"), or T.exp / T.sqrt / ... for math.*")

    def __complex__(self):
        from .pyops import refuse
        refuse(self, "complex(x)", "kernel values are real numbers")

    def __len__(self):
        from .pyops import refuse
        refuse(self, "len(x)", "a kernel value is a scalar: it has no length")

    def __iter__(self):
        from .pyops import refuse
        refuse(self, "iteration over it (for, unpacking, list(), in)", "a kernel value is a scalar: index a buffer instead")

    def __contains__(self, item):
        from .pyops import refuse
        refuse(self, "`in`", "a kernel value is a scalar: compare with == instead")


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: object
    type: DType

    @property
    def dtype(self) -> DType:
        return self.type

    def __bool__(self):
        """A constant's truth is known at compile time (TVM's IntImm has one too)."""
        return bool(self.value)


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A scalar name: block and thread indices, loop variables, let-bound values."""
    name: str
    type: DType = dt.int32

    @property
    def dtype(self) -> DType:
        return self.type


@dataclass(frozen=True, eq=False)
class BuiltinVar(Var):
    """A name the code generator declares itself and prints exactly as given (`tc_tid`, the flat
    thread index; `tc_tma_0`, a tensor-map pointer).  Every other Var is renamed as needed to a
    unique C identifier (codegen/names.py), so only these may be shared by name."""


TID = "tc_tid"


def thread_index() -> BuiltinVar:
    """The flat thread index of a CUDA block (threadIdx.x + threadIdx.y * X + ...)."""
    return BuiltinVar(TID)


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    type: DType

    @property
    def dtype(self) -> DType:
        return self.type


@dataclass(frozen=True, eq=False)
class Unary(Expr):
    op: str  # "neg", "not", "bitnot"
    a: Expr

    @property
    def dtype(self) -> DType:
        return dt.bool_ if self.op == "not" else self.a.dtype


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """A math function (`exp`, `sqrt`, ...) by name.  Device intrinsics of the header library are
    typed `IntrinsicCall`s (ir/intrinsics)."""
    op: str
    args: tuple
    type: DType

    @property
    def dtype(self) -> DType:
        return self.type


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    value: Expr
    type: DType

    @property
    def dtype(self) -> DType:
        return self.type


@dataclass(frozen=True, eq=False)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr

    @property
    def dtype(self) -> DType:
        return self.a.dtype


@dataclass(frozen=True, eq=False)
class Load(Expr):
    buffer: "Buffer"  # noqa: F821  (ir.buffer.Buffer)
    indices: tuple

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype


@dataclass(frozen=True, eq=False)
class Ref(Expr):
    """The address of one element, `&buffer[indices]`: the target of atomics and intrinsics."""
    buffer: "Buffer"  # noqa: F821
    indices: tuple

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype


COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")
LOGIC_OPS = ("and", "or")
BIT_OPS = ("&", "|", "^", "<<", ">>")
ARITH_OPS = ("+", "-", "*", "/", "//", "%", "min", "max")

_PY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul,
    "//": operator.floordiv, "%": operator.mod, "min": min, "max": max,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "and": lambda x, y: bool(x and y), "or": lambda x, y: bool(x or y),
}


def const(value, dtype: DType | str | None = None, span: Span | None = None) -> Const:
    if dtype is None:
        if isinstance(value, bool):
            dtype = dt.bool_
        elif isinstance(value, int):
            dtype = dt.int32 if -2**31 <= value < 2**31 else dt.int64
        else:
            dtype = dt.float32
    dtype = dt.dtype(dtype)
    if dtype.is_float:
        try:
            value = float(value)
        except OverflowError:   # a Python int past every float (10**400): no dtype holds it
            from ..errors import TilecraftError  # lazy: errors imports the ir package
            raise TilecraftError(f"the constant {_short(value)} is too large for {dtype} (or any float type)",
                                 span) from None
    elif dtype.is_bool:
        value = bool(value)
    else:
        value = int(value)
        if not -2**63 <= value < 2**64:   # past int64 / uint64: no C literal holds it
            from ..errors import TilecraftError
            raise TilecraftError(f"the constant {_short(value)} does not fit in 64 bits ({dtype})", span)
    return Const(value, dtype, span=span)


def _short(value) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:10]}...{text[-6:]} ({len(text)} digits)"


def is_const(e, value=None) -> bool:
    return isinstance(e, Const) and (value is None or e.value == value)


def as_expr(value, like: DType | None = None, span: Span | None = None) -> Expr:
    """Turn a Python number into a Const typed after the other operand (TileLang's rule: a Python
    float takes the float operand's dtype; a Python float against an int becomes float32)."""
    if isinstance(value, Expr):
        return value
    if getattr(value, "scope", None) == "var":  # a T.alloc_var scalar used as a value
        return Load(value, (const(0),), span=span)
    if isinstance(value, bool):
        return const(value, dt.bool_, span)
    if isinstance(value, int):
        if like is not None and like.kind == "int" and like.bits <= 32 and not -2**31 <= value < 2**31:
            return const(value, dt.int64, span)  # a shape or bound past int32 (ir/index_width.py)
        if like is not None and not like.is_bool:
            return const(value, like, span)
        return const(value, None, span)
    if isinstance(value, float):
        if like is not None and like.is_float:
            return const(value, like, span)
        return const(value, dt.float32, span)
    raise TypeError(f"cannot use {value!r} ({type(value).__name__}) as a kernel expression")


def _fold(op: str, a: Const, b: Const, out: DType) -> Const | None:
    x, y = a.value, b.value
    try:
        if op == "/":
            r = x / y if out.is_float else int(x / y)
        elif op in ("//", "%") and out.is_float:
            # Python (floor) semantics, like the targets' tc::floordiv / tc::floormod.
            r = math.floor(x / y) if op == "//" else x % y
        else:
            r = _PY[op](x, y)
    except (ZeroDivisionError, ValueError, OverflowError):
        return None
    return const(r, out)


def binary(op: str, a, b, span: Span | None = None) -> Expr:
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        raise TypeError("binary() needs at least one IR operand")
    a = as_expr(a, b.dtype if isinstance(b, Expr) else None, span)
    b = as_expr(b, a.dtype, span)
    if op in COMPARE_OPS:
        operand = dt.promote(a.dtype, b.dtype)
        a, b = cast(a, operand), cast(b, operand)
        out = dt.bool_
    elif op in LOGIC_OPS:
        a, b = cast(a, dt.bool_), cast(b, dt.bool_)
        out = dt.bool_
    else:
        out = dt.promote(a.dtype, b.dtype)
        a, b = cast(a, out), cast(b, out)
    if isinstance(a, Const) and isinstance(b, Const):
        folded = _fold(op, a, b, out)
        if folded is not None:
            return folded
    simplified = _simplify(op, a, b)
    if simplified is not None:
        return simplified
    return Binary(op, a, b, out, span=span)


def _simplify(op: str, a: Expr, b: Expr) -> Expr | None:
    if op == "+":
        if is_const(b, 0):
            return a
        if is_const(a, 0):
            return b
    elif op == "-" and is_const(b, 0):
        return a
    elif op == "*":
        if is_const(b, 1):
            return a
        if is_const(a, 1):
            return b
        if (is_const(a, 0) or is_const(b, 0)) and a.dtype.is_int:
            return const(0, a.dtype)
    elif op in ("//", "/") and is_const(b, 1):
        return a
    elif op == "%" and is_const(b, 1) and a.dtype.is_int:
        return const(0, a.dtype)
    elif op == "and":
        if is_const(a, True):
            return b
        if is_const(b, True):
            return a
    elif op == "or":
        if is_const(a, False):
            return b
        if is_const(b, False):
            return a
    return None


def unary(op: str, a, span: Span | None = None) -> Expr:
    a = as_expr(a, span=span)
    if op == "not":
        a = cast(a, dt.bool_)
        if isinstance(a, Const):
            return const(not a.value, dt.bool_)
    elif isinstance(a, Const):
        if op == "neg":
            return const(-a.value, a.dtype)
        if op == "bitnot":
            return const(~a.value, a.dtype)
    return Unary(op, a, span=span)


def cast(value, dtype, span: Span | None = None) -> Expr:
    dtype = dt.dtype(dtype)
    value = as_expr(value, dtype, span)
    if value.dtype is dtype:
        return value
    if isinstance(value, Const) and (dtype.is_float or not value.dtype.is_float):
        return const(value.value, dtype)
    return Cast(value, dtype, span=span)


def select(cond, a, b, span: Span | None = None) -> Expr:
    cond = cast(as_expr(cond, span=span), dt.bool_)
    if isinstance(a, Expr) or isinstance(b, Expr):
        a = as_expr(a, b.dtype if isinstance(b, Expr) else None, span)
        b = as_expr(b, a.dtype, span)
        out = dt.promote(a.dtype, b.dtype)
        a, b = cast(a, out), cast(b, out)
    else:
        a, b = as_expr(a, span=span), as_expr(b, span=span)
        out = dt.promote(a.dtype, b.dtype)
        a, b = cast(a, out), cast(b, out)
    if isinstance(cond, Const):
        return a if cond.value else b
    return Select(cond, a, b, span=span)


# Math intrinsics: name -> number of arguments.  Integer inputs are computed in float32.
MATH_FUNCS = {
    "exp": 1, "exp2": 1, "exp10": 1, "log": 1, "log2": 1, "log10": 1, "log1p": 1, "sqrt": 1,
    "rsqrt": 1, "tanh": 1, "sigmoid": 1, "erf": 1, "floor": 1, "ceil": 1, "round": 1,
    "trunc": 1, "sin": 1, "cos": 1, "tan": 1, "abs": 1, "pow": 2, "fmod": 2, "atan2": 2,
    "isnan": 1, "isinf": 1, "isfinite": 1,
    # the rest of TVM's float math set (TileLang's T.sinh, ...)
    "sinh": 1, "cosh": 1, "asin": 1, "acos": 1, "atan": 1, "asinh": 1, "acosh": 1, "atanh": 1,
    "nearbyint": 1, "hypot": 2, "copysign": 2, "nextafter": 2,
    # a * b + c rounded once (the CPU target's gemm loops: CUDA contracts the same chain into FFMA)
    "fma": 3,
    # integer bit counts (32- and 64-bit integers; the result is int32)
    "clz": 1, "popcount": 1,
}
INT_FUNCS = ("clz", "popcount")


def call(op: str, *args, span: Span | None = None, dtype: DType | None = None) -> Expr:
    args = tuple(as_expr(a, span=span) for a in args)
    if dtype is None:
        if op in ("isnan", "isinf", "isfinite"):
            dtype = dt.bool_
        elif op == "abs":
            dtype = args[0].dtype
        elif op in INT_FUNCS:
            dtype = dt.int32
        else:
            dtype = args[0].dtype
            for other in args[1:]:
                dtype = dt.promote(dtype, other.dtype)
            if not dtype.is_float:
                dtype = dt.float32
        if op not in ("isnan", "isinf", "isfinite") + INT_FUNCS:
            args = tuple(cast(x, dtype) for x in args)
    return Call(op, args, dtype, span=span)


def _compare(op: str, a: Expr, o):
    """`a == o` / `a != o`: a comparison in the kernel when `o` is a number or a kernel value;
    NotImplemented (Python's identity answer: a kernel value is not None, not a string) otherwise."""
    if not isinstance(o, (Expr, int, float)) and getattr(o, "scope", None) != "var":
        return NotImplemented
    return binary(op, a, o)


def power(a, b, mod=None) -> Expr:
    """`a ** b` on kernel values (the parser's `**` and Python's pow() in helpers): a small integer
    exponent multiplies out, any other exponent is T.pow."""
    if mod is not None:
        from .pyops import refuse
        refuse(a if isinstance(a, Expr) else b, "pow(a, b, mod)", "(a ** b) % mod")
    if isinstance(a, Expr) and isinstance(b, int) and not isinstance(b, bool) and b in (1, 2, 3):
        out = a
        for _ in range(b - 1):
            out = binary("*", out, a)
        return out
    return call("pow", a, b)

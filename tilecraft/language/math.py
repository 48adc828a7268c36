"""Scalar math and expression helpers: `T.exp`, `T.max`, `T.ceildiv`, `T.if_then_else`, ...

Every helper folds to a Python value when all its arguments are Python numbers (so
`T.ceildiv(N, block_N)` is a plain int at parse time) and builds IR otherwise.
"""
from __future__ import annotations

import math as _m

import builtins as _builtins

from ..ir import Const, Expr, as_expr, binary, call, cast as _cast, const, select, unary, dtype as dt
from ..ir.semantics import has_infinity, max_value, min_value  # noqa: F401  (T.max_value, T.min_value)
from .builder import error


_pyabs = _builtins.abs


def _py(*xs) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, Expr) for x in xs)


def _unary_math(name, pyfn):
    def f(x):
        if _py(x):
            return pyfn(x)
        return call(name, x)
    f.__name__ = name
    f.__doc__ = f"Element {name} (float math; integer inputs are computed in float32)."
    return f


def _sigmoid(x):
    return 1.0 / (1.0 + _m.exp(-x))


exp = _unary_math("exp", _m.exp)
exp2 = _unary_math("exp2", lambda x: 2.0 ** x)
exp10 = _unary_math("exp10", lambda x: 10.0 ** x)
log = _unary_math("log", _m.log)
log2 = _unary_math("log2", _m.log2)
log10 = _unary_math("log10", _m.log10)
log1p = _unary_math("log1p", _m.log1p)
sqrt = _unary_math("sqrt", _m.sqrt)
rsqrt = _unary_math("rsqrt", lambda x: 1.0 / _m.sqrt(x))
tanh = _unary_math("tanh", _m.tanh)
sigmoid = _unary_math("sigmoid", _sigmoid)
erf = _unary_math("erf", _m.erf)
floor = _unary_math("floor", _m.floor)
ceil = _unary_math("ceil", _m.ceil)
_round = _unary_math("round", lambda x: float(_builtins.round(x)))  # half to even, as the targets
_ROUNDING = {"rn": "round", "rz": "trunc", "ru": "ceil", "rd": "floor"}


def round(x, span=None):  # noqa: A001
    """`T.round(x)`: x rounded to the nearest integer (ties to even on the targets).  The second
    argument is TVM's `span` (a source location, no effect on the value); an IEEE rounding-mode name
    there (`"rn"`, `"rz"`, `"ru"`, `"rd"`) picks nearest / toward zero / up / down."""
    if isinstance(span, str):
        op = _ROUNDING.get(span)
        if op is None:
            raise error(f"T.round(x, {span!r}): unknown rounding mode; expected one of {', '.join(_ROUNDING)}")
        return {"round": _round, "trunc": trunc, "ceil": ceil, "floor": floor}[op](x)
    return _round(x)
trunc = _unary_math("trunc", _m.trunc)
sin = _unary_math("sin", _m.sin)
cos = _unary_math("cos", _m.cos)
tan = _unary_math("tan", _m.tan)
isnan = _unary_math("isnan", _m.isnan)
isinf = _unary_math("isinf", _m.isinf)
isfinite = _unary_math("isfinite", _m.isfinite)
sinh = _unary_math("sinh", _m.sinh)
cosh = _unary_math("cosh", _m.cosh)
asin = _unary_math("asin", _m.asin)
acos = _unary_math("acos", _m.acos)
atan = _unary_math("atan", _m.atan)
asinh = _unary_math("asinh", _m.asinh)
acosh = _unary_math("acosh", _m.acosh)
atanh = _unary_math("atanh", _m.atanh)
nearbyint = _unary_math("nearbyint", lambda x: float(_builtins.round(x)))  # half to even, as C's nearbyint


def _binary_math(name, pyfn):
    def f(a, b):
        if _py(a, b):
            return pyfn(a, b)
        return call(name, a, b)
    f.__name__ = name
    f.__doc__ = f"Element {name}(a, b) (float math; integer inputs are computed in float32)."
    return f


hypot = _binary_math("hypot", _m.hypot)
copysign = _binary_math("copysign", _m.copysign)
nextafter = _binary_math("nextafter", _m.nextafter)


def _bit_count(name, pyfn):
    def f(x):
        if isinstance(x, int) and not isinstance(x, bool):
            return pyfn(x)
        x = as_expr(x)
        if not x.dtype.is_int or x.dtype.bits not in (32, 64):
            raise error(f"T.{name} takes a 32- or 64-bit integer, got a {x.dtype} value",
                        hint=f"cast it first: T.{name}(T.cast(x, \"uint32\"))")
        return call(name, x)
    f.__name__ = name
    f.__doc__ = f"T.{name}(x) of a 32- or 64-bit integer (an int32 result)."
    return f


clz = _bit_count("clz", lambda x: 32 - (x & 0xffffffff).bit_length())
popcount = _bit_count("popcount", lambda x: bin(x & (0xffffffff if -2**31 <= x < 2**32 else 2**64 - 1)).count("1"))

# Fast-math spellings: same semantics, the CUDA target may use approximate instructions.
__exp = exp
__exp10 = exp10
__log = log
__log2 = log2
__log10 = log10
__tan = tan
__cos = cos
__sin = sin


def abs(x):  # noqa: A001
    if _py(x):
        return x if x >= 0 else -x
    return call("abs", x)


def pow(x, y):  # noqa: A001
    if _py(x, y):
        return x ** y
    return call("pow", x, y)


def fmod(x, y):
    if _py(x, y):
        return _m.fmod(x, y)
    return call("fmod", x, y)


def atan2(y, x):
    if _py(y, x):
        return _m.atan2(y, x)
    return call("atan2", y, x)


def max(a, b, *rest):  # noqa: A001
    vals = (a, b) + rest
    out = vals[0]
    for v in vals[1:]:
        out = (out if out >= v else v) if _py(out, v) else binary("max", out, v)
    return out


def min(a, b, *rest):  # noqa: A001
    vals = (a, b) + rest
    out = vals[0]
    for v in vals[1:]:
        out = (out if out <= v else v) if _py(out, v) else binary("min", out, v)
    return out


def _positive_int(b) -> bool:
    """`b` is a compile-time integer > 0 (a Python int or an integer constant)."""
    if isinstance(b, bool):
        return False
    if isinstance(b, int):
        return b > 0
    return isinstance(b, Const) and b.dtype.is_int and b.value > 0


def _divisor(name, a, b):
    """Refuse a divisor that is 0 when the kernel is built (an integer division by zero traps on the
    CPU target and is undefined on the GPU)."""
    zero = (isinstance(b, (int, float)) and not isinstance(b, bool) and b == 0 and (_py(a) or isinstance(b, int))) \
        or (isinstance(b, Const) and b.dtype.is_int and b.value == 0)
    if zero:
        from .builder import error
        raise error(f"T.{name}({_show(a)}, {_show(b)}): division by zero")


def _show(x):
    from ..ir.printer import to_text
    return to_text(x) if isinstance(x, Expr) else repr(x)


def ceildiv(a, b):
    _divisor("ceildiv", a, b)
    if _py(a, b):
        return -(-a // b)
    a_int = not isinstance(a, float) and (not isinstance(a, Expr) or a.dtype.is_int)
    if a_int and _positive_int(b):
        # ceil(a / b) == floor((a + b - 1) / b) for every integer a when b > 0; the add keeps the
        # common case (non-negative index arithmetic) a plain C division.
        bv = b.value if isinstance(b, Const) else b
        return binary("//", binary("+", as_expr(a), bv - 1), b)
    # Any other divisor (negative, or only known at run time): Python's -(-a // b).
    return unary("neg", binary("//", unary("neg", as_expr(a, b.dtype if isinstance(b, Expr) else None)), b))


def floordiv(a, b):
    _divisor("floordiv", a, b)
    return a // b if _py(a, b) else binary("//", a, b)


def floormod(a, b):
    _divisor("floormod", a, b)
    return a % b if _py(a, b) else binary("%", a, b)


def truncdiv(a, b):
    _divisor("truncdiv", a, b)
    if _py(a, b):
        if isinstance(a, int) and isinstance(b, int):
            q = _pyabs(a) // _pyabs(b)   # exact for big ints (no float round trip)
            return q if (a < 0) == (b < 0) else -q
        return int(a / b)
    return binary("/", a, b)


def truncmod(a, b):
    """Remainder of the division rounded toward zero (C's `%`, `fmod` for floats): the result
    takes the sign of the dividend, unlike T.floormod / Python's `%`."""
    _divisor("truncmod", a, b)
    if _py(a, b):
        if isinstance(a, int) and isinstance(b, int):
            r = _pyabs(a) % _pyabs(b)
            return r if a >= 0 else -r
        return _m.fmod(a, b)
    a = as_expr(a, b.dtype if isinstance(b, Expr) else None)
    b = as_expr(b, a.dtype)
    out = dt.promote(a.dtype, b.dtype)
    if out.is_bool:
        out = dt.int32
    a, b = _cast(a, out), _cast(b, out)
    if isinstance(a, Const) and isinstance(b, Const) and b.value != 0:
        return const(truncmod(a.value, b.value), out)
    return call("truncmod", a, b, dtype=out)


def _is_dtype(x) -> bool:
    if isinstance(x, dt.DType):
        return True
    try:
        return isinstance(x, str) and dt.dtype(x) is not None
    except ValueError:
        return False


class _NullHandle:
    def __repr__(self):
        return "T.reinterpret(T.uint64(0), dtype=\"handle\")"


NULL_HANDLE = _NullHandle()


def reinterpret(value, dtype):
    """The bits of `value` read as `dtype`, a type of the same width (TileLang's T.reinterpret,
    e.g. a float32's IEEE bits as uint32).  TVM's argument order `(dtype, value)` is accepted too."""
    if _is_dtype(value) and not _is_dtype(dtype):
        value, dtype = dtype, value
    if dtype == "handle":  # TVM's null pointer, `T.reinterpret(T.uint64(0), dtype="handle")`: only a T.attr value
        return NULL_HANDLE
    try:
        to = dt.dtype(dtype)
    except ValueError as e:
        raise error(f"T.reinterpret: {e}") from None
    v = as_expr(value)
    if v.dtype.is_bool or to.is_bool or v.dtype.bits != to.bits:
        raise error(f"T.reinterpret: cannot reinterpret a {v.dtype} value as {to}: both types must be "
                    f"numbers of the same width ({v.dtype.bits} vs {to.bits} bits)",
                    hint=f"use T.cast to convert the value instead of its bits")
    if v.dtype == to:
        return v
    return call("reinterpret", v, dtype=to)


def if_then_else(cond, a, b):
    if isinstance(cond, bool) or (_py(cond) and not isinstance(cond, Expr)):
        return a if cond else b
    return select(cond, a, b)


Select = if_then_else


def cast(x, dtype):
    from .dtypes import require_computable
    try:
        d = dt.dtype(dtype)
    except ValueError as e:
        raise error(f"T.cast: {getattr(e, 'message', e)}", hint=getattr(e, "hint", None)) from None
    require_computable(d, "T.cast")
    if _py(x):
        return _cast(as_expr(x), d)
    return _cast(x, d)


# TileLang's tl.infinity: the float types with an infinity (float8_e4m3fn has none: 448 is its
# largest value, and it has NaN only; integers and bool have none)
_NO_INFINITY_HINT = {
    "float8_e4m3fn": "float8_e4m3fn has no infinity (its largest value is 448, and it has NaN only); "
                     "use T.max_value(\"float8_e4m3fn\") / T.min_value(...) for the largest finite values",
}


def infinity(dtype):
    d = dt.dtype(dtype)
    if not has_infinity(d):
        raise error(f"T.infinity({d.name!r}): {d.name} has no infinity",
                    hint=_NO_INFINITY_HINT.get(d.name, f"use T.max_value({d.name!r}) / T.min_value({d.name!r}) "
                                                       f"for its largest / smallest values"))
    return const(float("inf"), d)


def And(a, b):  # noqa: N802
    return (a and b) if _py(a, b) else binary("and", a, b)


def Or(a, b):  # noqa: N802
    return (a or b) if _py(a, b) else binary("or", a, b)


def Not(a):  # noqa: N802
    return (not a) if _py(a) else unary("not", a)


def bitwise_and(a, b):
    return binary("&", a, b)


def bitwise_or(a, b):
    return binary("|", a, b)


def bitwise_xor(a, b):
    return binary("^", a, b)


def shift_left(a, b):
    return binary("<<", a, b)


def shift_right(a, b):
    return binary(">>", a, b)

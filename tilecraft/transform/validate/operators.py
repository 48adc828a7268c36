"""Operators a dtype does not have, integer division by a constant zero, constant shifts out of range.

`x << 1` or `t ^ 1` on a float, `~x` on a float: C++ has no such operator (the C++ compiler would
report it in generated code); `a // 0` and `a % 0` on integers trap on the CPU target and are
undefined on the GPU; `i << -1` or `i >> 32` on an int32 is undefined in C++ and CUDA alike.  A gemm multiplies numbers: a bool operand or accumulator has no meaning.
"""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import Binary, Const, Unary
from ...ir.expr import BIT_OPS
from ...ir.printer import to_text
from .walker import Walker


class _Operators(Walker):
    def visit_Binary(self, e: Binary):
        if e.op in BIT_OPS and not (e.a.dtype.is_int or e.a.dtype.is_bool) or \
                e.op in BIT_OPS and not (e.b.dtype.is_int or e.b.dtype.is_bool):
            bad = e.a if not (e.a.dtype.is_int or e.a.dtype.is_bool) else e.b
            raise TilecraftError(
                f"`{to_text(e)}`: the operator {e.op} takes integers, but {to_text(bad)} is {bad.dtype}",
                e.span or self.span,
                hint="bit operations on a float's bits: T.reinterpret(x, 'int32') first; a power of two: "
                     "multiply (x * 2.0)")
        width = max(e.a.dtype.bits, 32)  # narrower integers are promoted to int before a shift
        if e.op in ("<<", ">>") and e.a.dtype.is_int and isinstance(e.b, Const) and \
                not 0 <= int(e.b.value) < width:
            raise TilecraftError(
                f"`{to_text(e)}`: a shift by {int(e.b.value)} of a {e.a.dtype} value is undefined (C++ and CUDA "
                f"shift by 0 to {width - 1} bits only)", e.span or self.span,
                hint=f"cast the value to a wider type first (T.Cast('int64', x)) or shift the other way")
        if e.op in ("//", "%") and e.dtype.is_int and isinstance(e.b, Const) and e.b.value == 0:
            raise TilecraftError(f"integer division by zero: `{to_text(e)}`", e.span or self.span)
        self.generic(e)

    def visit_Unary(self, e: Unary):
        if e.op == "bitnot" and not (e.a.dtype.is_int or e.a.dtype.is_bool):
            raise TilecraftError(f"`{to_text(e)}`: the operator ~ takes integers, but {to_text(e.a)} is "
                                 f"{e.a.dtype}", e.span or self.span)
        self.generic(e)

    def visit_Gemm(self, g):
        for what, r in (("A", g.a), ("B", g.b), ("the accumulator C", g.c)):
            if r.buffer.dtype.is_bool:
                raise TilecraftError(
                    f"T.gemm: {what} ({r.buffer.name}) is bool; a gemm multiplies and adds numbers",
                    g.span or self.span,
                    hint="accumulate in float32 (or int32 for int8 operands)")
        self.generic(g)


def check_operators(func, target) -> None:
    _Operators(target).visit(func.body)

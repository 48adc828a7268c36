"""What int4 (TileLang's T.int4: two per byte) supports, and the rest refused at its line.

An int4 element can be loaded (sign-extended), stored (its low 4 bits), copied between global,
shared, fragment and local tiles, converted with T.cast (exactly, to any wider type) and multiplied
by T.gemm with int4 x int4 -> int32 accumulation.  Arithmetic whose result would itself be int4
(`a + b` on two int4 values, `-a`, T.exp), reductions and scans that would accumulate in int4,
atomics into int4 memory and views that rename int4 bytes have no defined 4-bit meaning here: they
are refused with the cast that makes them well defined.
"""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import AtomicAdd, Binary, Call, Cumsum, Gemm, Reduce, Ref, Unary, View
from ...ir import dtype as dt
from ...ir.printer import to_text
from .walker import Walker

_CAST_FIRST = "cast to a wider type first: T.cast(x, 'int32') (exact for every int4 value), then compute"


class _Packed(Walker):
    def _int4_result(self, e, what: str):
        if e.dtype.packed:
            raise TilecraftError(f"`{to_text(e)}`: {what} on int4 values would give an int4 result, which "
                                 f"tilecraft does not compute in 4 bits", e.span or self.span, hint=_CAST_FIRST)

    def visit_Binary(self, e: Binary):
        self._int4_result(e, f"the operator {e.op}")
        self.generic(e)

    def visit_Unary(self, e: Unary):
        self._int4_result(e, f"the operator {e.op}")
        self.generic(e)

    def visit_Call(self, e: Call):
        self._int4_result(e, e.op)
        self.generic(e)

    def visit_Ref(self, e: Ref):
        if e.buffer.dtype.packed:
            raise TilecraftError(f"the address of an element of {e.buffer.name} (int4, two per byte) is not an "
                                 f"element's address: int4 tiles are read and written by element, T.copy and T.gemm",
                                 e.span or self.span)
        self.generic(e)

    def visit_Gemm(self, g: Gemm):
        a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
        if a.dtype.packed or b.dtype.packed:
            if not (a.dtype is dt.int4 and b.dtype is dt.int4 and c.dtype is dt.int32):
                raise TilecraftError(
                    f"T.gemm: A {a.name} is {a.dtype}, B {b.name} is {b.dtype}, C {c.name} is {c.dtype}; an int4 gemm "
                    f"multiplies int4 by int4 into an int32 accumulator", g.span or self.span,
                    hint="make both operands int4 and the accumulator int32 (T.alloc_fragment(..., 'int32')), or "
                         "copy the int4 tile into a wider one (T.copy casts) and multiply that")
        if c.dtype.packed:
            raise TilecraftError(f"T.gemm: the accumulator {c.name} is int4; accumulate in int32",
                                 g.span or self.span)
        self.generic(g)

    def _no_int4(self, buf, what: str, node):
        if buf.dtype.packed:
            raise TilecraftError(f"{what}: {buf.name} is int4, which would {'hold' if 'atomic' in what else 'accumulate in'} "
                                 f"4 bits", node.span or self.span,
                                 hint="T.copy the tile into an int32 one first (T.copy casts) and use that")

    def visit_Reduce(self, r: Reduce):
        self._no_int4(r.src, f"T.reduce_{r.kind}", r)
        self._no_int4(r.dst, f"T.reduce_{r.kind}", r)
        self.generic(r)

    def visit_Cumsum(self, c: Cumsum):
        self._no_int4(c.src, "T.cumsum", c)
        self._no_int4(c.dst, "T.cumsum", c)
        self.generic(c)

    def visit_AtomicAdd(self, a: AtomicAdd):
        self._no_int4(a.dst.buffer, f"T.atomic_{a.kind}", a)
        self.generic(a)

    def visit_View(self, v: View):
        base = v.base if hasattr(v.base, "dtype") else None
        if v.buffer.dtype.packed or (base is not None and base.dtype.packed):
            raise TilecraftError(f"a view of {v.buffer.name}: int4 storage (two per byte) cannot be renamed as "
                                 f"another shape or type", v.span or self.span,
                                 hint="copy the int4 tile (T.copy) instead of viewing it")
        self.generic(v)


def check_packed(func, target) -> None:
    _Packed(target).visit(func.body)

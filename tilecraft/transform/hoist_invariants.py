"""Per-thread address arithmetic out of unrolled loops (CUDA targets), for the device compiler's sake.

Lowering writes every index of an unrolled loop's body as one expression of the loop variable and
the thread index, e.g. a fragment-to-shared store of the epilogue

    stage[((tid / 4) % 8 + (((g * 2) / 2) % 2) * 8 + (tid / 32) * 16) * 136 + (tid % 4) * 2 + ((g * 2) / 4) * 8]

repeated in each of 64 unrolled iterations.  NVRTC folds it back, but the folding is most of its
optimizer time for such kernels (the README GEMM: 0.35 s -> 0.30 s when written by hand without
it).  Here each index of a Load, Store or Ref inside an unrolled loop is

1. normalised: a floor division or modulo by a constant splits off the terms of the numerator that
   are multiples of the divisor, and a common factor of the numerator and the divisor cancels
   (`(g*2)/2 -> g`, `(e*128 + tid)/16 -> e*8 + tid/16`, `(g*2) % 2 -> 0`); these identities are exact
   for floor division and modulo, which are the IR's `//` and `%`, whatever the signs;
2. for a shared or global buffer (not a swizzled tile, whose printer needs its row and column),
   flattened to one row-major offset, then split into the part that does not change in the loop (built from constants, thread and block
   indices and values bound outside it; never a memory read) and the rest, and the first becomes a
   `Let` just before the loop (one per distinct expression).

The values of every index are unchanged (tests/cuda/test_hoist_invariants.py checks the rewrite
numerically); only their spelling moves.  Indices with a cast or a non-int32 part, and indices into
a dimension that may exceed 2^31 elements, are left alone, so 64-bit address arithmetic keeps its
widths.
"""
from __future__ import annotations

from dataclasses import replace
from math import gcd

from ..ir import For, Let, Var, collect, seq
from ..ir.index_width import wide_dims
from ..ir import dtype as dt
from ..ir.analysis import from_linear, linear
from ..ir.expr import Binary, BuiltinVar, Const, Expr, Load, Ref, Unary, binary, const
from ..ir.functor import Mutator
from ..ir.lowering import SWIZZLE_SM80, SWIZZLE_SM90
from ..ir.stmt import Store

_PURE = (Binary, Unary, Const, Var)  # what an index may be built from to be rewritten at all


def _plain_int(e) -> bool:
    """An int32 expression of constants, variables and integer arithmetic only (divisions by
    positive constants)."""
    if not isinstance(e, _PURE) or e.dtype is not dt.int32:
        return False
    if isinstance(e, Binary):
        if e.op in ("//", "%") and not (isinstance(e.b, Const) and e.b.value > 0):
            return False  # a hoisted division must not divide by a value the loop might never see
        return e.op in ("+", "-", "*", "//", "%") and _plain_int(e.a) and _plain_int(e.b)
    if isinstance(e, Unary):
        return e.op == "neg" and _plain_int(e.a)
    return True


def _sum(terms: dict, c: int) -> Expr:
    return from_linear(c, terms, dt.int32)


def normalize(e: Expr) -> Expr:
    """`e` with floor divisions and modulos by positive constants simplified (exact identities)."""
    if isinstance(e, Unary):
        a = normalize(e.a)
        return e if a is e.a else replace(e, a=a)
    if not isinstance(e, Binary):
        return e
    a, b = normalize(e.a), normalize(e.b)
    if e.op not in ("//", "%") or not isinstance(b, Const) or b.value <= 0:
        return e if (a is e.a and b is e.b) else binary(e.op, a, b)
    lin = linear(a)
    if lin is None:
        return binary(e.op, a, b)
    c, terms = lin
    d = int(b.value)
    g = gcd(d, c, *terms.values())
    scale = 1
    if g > 1:  # (g*n) // (g*d') == n // d';  (g*n) % (g*d') == (n % d') * g
        c, terms, d = c // g, {k: v // g for k, v in terms.items()}, d // g
        scale = g if e.op == "%" else 1
    whole = {k: v // d for k, v in terms.items() if v % d == 0}
    rest = {k: v for k, v in terms.items() if v % d}
    q, r = divmod(c, d)  # floor division: c == q*d + r, 0 <= r < d
    if e.op == "//":
        out = _sum(whole, q)
        if rest:
            out = binary("+", out, binary("//", _sum(rest, r), d))
        return out
    if not rest:
        return const(r * scale, dt.int32)
    out = binary("%", _sum(rest, r), d)
    return binary("*", out, scale) if scale != 1 else out


def _key(e):
    """A structural key: equal keys, equal values (Vars by identity)."""
    if isinstance(e, Const):
        return ("c", e.value)
    if isinstance(e, Var):
        return ("v", id(e))
    if isinstance(e, Binary):
        return (e.op, _key(e.a), _key(e.b))
    return (type(e).__name__, _key(e.a))


class _Indices(Mutator):
    """Rewrites the indices under one unrolled loop, collecting the Lets to place before it."""

    def __init__(self, bound: set, lets: list, names: dict, keep_dims: frozenset = frozenset()):
        super().__init__()
        self.bound, self.lets, self.names, self.keep_dims = bound, lets, names, keep_dims

    def invariant(self, e) -> bool:
        return not any(isinstance(v, Var) and not isinstance(v, BuiltinVar) and v in self.bound
                       for v in collect(e, lambda n: isinstance(n, Var)))

    def index(self, e):
        if not _plain_int(e):
            return e
        n = normalize(e)
        lin = linear(n)
        if lin is None:
            return n
        c, terms = lin
        inv = {k: v for k, v in terms.items() if self.invariant(k)}
        if not inv:
            return n
        rest = {k: v for k, v in terms.items() if k not in inv}
        hoisted = _sum(inv, 0)
        if isinstance(hoisted, (Var, Const)):  # nothing to save
            return n
        key = _key(hoisted)
        var = self.names.get(key)
        if var is None:
            var = self.names[key] = Var(f"tc_h{len(self.names)}", dt.int32)
            self.lets.append(Let(var, hoisted))
        return binary("+", var, _sum(rest, c))

    def indices(self, buf, idx: tuple) -> tuple:
        if buf.scope not in ("shared", "global"):  # register arrays: their indices fold to constants
            return idx
        if len(idx) > 1 and buf not in self.keep_dims and buf.is_static and buf.numel < 2 ** 31 and all(map(_plain_int, idx)):
            # one row-major offset (as the printer would write it), so the invariant parts of all
            # dimensions become one Let: the address of the loop's first element
            flat = None
            for i, stride in zip(idx, buf.strides()):
                t = binary("*", i, stride)
                flat = t if flat is None else binary("+", flat, t)
            return (self.index(flat),)
        # an index into a dimension that may exceed 2^31 stays whole: the printer computes it in
        # int64 (ir/index_width.py), which an int32 Let of its invariant part would defeat
        new = tuple(i if long_dim else self.index(i) for i, long_dim in zip(idx, wide_dims(buf)))
        return idx if all(a is b for a, b in zip(new, idx)) else new

    def visit_Load(self, e):
        idx = self.indices(e.buffer, e.indices)
        return e if idx is e.indices else replace(e, indices=idx)

    def visit_Ref(self, e):
        idx = self.indices(e.buffer, e.indices)
        return e if idx is e.indices else replace(e, indices=idx)

    def visit_Store(self, s):
        idx = self.indices(s.buffer, s.indices)
        value = self.visit(s.value)
        if idx is s.indices and value is s.value:
            return s
        return replace(s, indices=idx, value=value)


class _Loops(Mutator):
    def __init__(self, keep_dims: frozenset):
        super().__init__()
        self.keep_dims = keep_dims

    def visit_For(self, s):
        body = self.visit(s.body)  # inner loops first: their Lets are then bound inside this one
        if s.kind != "unroll":
            return s if body is s.body else replace(s, body=body)
        bound = {s.var} | {n.var for n in collect(body, lambda n: isinstance(n, (Let, For)))}
        lets: list = []
        body = _Indices(bound, lets, {}, self.keep_dims).visit(body)
        loop = s if body is s.body else replace(s, body=body)
        return seq(*lets, loop) if lets else loop


def hoist_invariants(func, ctx):
    # swizzled shared tiles are addressed from their (row, column) by the printer: never flattened
    keep = frozenset(func.lowering.swizzled(SWIZZLE_SM80)) | frozenset(func.lowering.swizzled(SWIZZLE_SM90))
    return replace(func, body=_Loops(keep).visit(func.body))

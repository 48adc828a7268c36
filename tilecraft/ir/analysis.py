"""Small integer analyses shared by the front end and the passes.

- `linear(e)`: an integer expression as `const + sum(coef * atom)`; lets the front end prove that
  a slice `x*64:(x+1)*64` has the static extent 64, and lets the bounds pass compare indices.
- `bounds(e, env)`: a conservative integer interval for `e` given intervals of its variables;
  used to drop bounds guards that can never fail and to reject regions that can never fit.
- `divisible(e, n)`: whether `e` is provably a multiple of `n` (alignment for vector access).
"""
from __future__ import annotations

from .expr import Binary, Cast, Const, Expr, Unary, Var, const, binary


def linear(e, exact_division: bool = False) -> tuple[int, dict] | None:
    """Return (constant, {atom: coefficient}) or None when `e` is not linear in its atoms.
    `exact_division`: `a // d` (floor division by a positive constant) whose every coefficient of
    `a` is a multiple of d is linear too: (d*L + c) // d == L + c // d for any integer L."""
    if isinstance(e, int):
        return e, {}
    if isinstance(e, Const):
        return (int(e.value), {}) if not e.dtype.is_float else None
    if not isinstance(e, Expr) or e.dtype.is_float:
        return None
    if isinstance(e, Binary) and e.op in ("+", "-"):
        a, b = linear(e.a, exact_division), linear(e.b, exact_division)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "+" else -1
        terms = dict(a[1])
        for k, v in b[1].items():
            terms[k] = terms.get(k, 0) + sign * v
        return a[0] + sign * b[0], {k: v for k, v in terms.items() if v != 0}
    if isinstance(e, Binary) and e.op == "*":
        a, b = linear(e.a, exact_division), linear(e.b, exact_division)
        if a is None or b is None:
            return None
        if not b[1]:
            a, b = b, a
        if not a[1]:
            c = a[0]
            return c * b[0], {k: c * v for k, v in b[1].items() if c * v != 0}
        return 0, {e: 1}
    if exact_division and isinstance(e, Binary) and e.op == "//" and isinstance(e.b, Const) \
            and not e.b.dtype.is_float and int(e.b.value) > 0:
        d = int(e.b.value)
        a = linear(e.a, True)
        if a is not None and all(v % d == 0 for v in a[1].values()):
            return a[0] // d, {k: v // d for k, v in a[1].items()}
        return 0, {e: 1}
    if isinstance(e, Unary) and e.op == "neg":
        a = linear(e.a, exact_division)
        return None if a is None else (-a[0], {k: -v for k, v in a[1].items()})
    if isinstance(e, Cast) and e.value.dtype.is_int:
        return linear(e.value, exact_division)
    return 0, {e: 1}


def share_equal(*exprs) -> tuple:
    """`exprs` with structurally equal subtrees made one object, bottom-up (Vars and Loads stay as they
    are: equal only when the same object), so that `linear` sees `(i % 4) * 2` written twice as one
    atom.  For bounds evaluated at the same point, such as a slice's start and stop."""
    from .functor import Mutator
    memo: dict = {}

    class _Share(Mutator):
        def _one(self, e, *key):
            return memo.setdefault((type(e).__name__, str(e.dtype)) + key, e)

        def visit_Const(self, e):
            return self._one(e, e.value)

        def visit_Binary(self, e):
            e = self.generic(e)
            return self._one(e, e.op, id(e.a), id(e.b))

        def visit_Unary(self, e):
            e = self.generic(e)
            return self._one(e, e.op, id(e.a))

        def visit_Cast(self, e):
            e = self.generic(e)
            return self._one(e, id(e.value))
    share = _Share()
    return tuple(share.visit(x) if isinstance(x, Expr) else x for x in exprs)


def static_difference(a, b, exact_division: bool = False) -> int | None:
    """`a - b` when it is a compile-time constant, else None (`exact_division`: see `linear`)."""
    la, lb = linear(a, exact_division), linear(b, exact_division)
    if la is None or lb is None:
        return None
    terms = dict(la[1])
    for k, v in lb[1].items():
        terms[k] = terms.get(k, 0) - v
    if any(v != 0 for v in terms.values()):
        return None
    return la[0] - lb[0]


def as_int(e) -> int | None:
    if isinstance(e, int):
        return e
    if isinstance(e, Const) and not e.dtype.is_float:
        return int(e.value)
    return None


INF = float("inf")


def bounds(e, env: dict) -> tuple:
    """Conservative [lo, hi] of an integer expression; `env` maps Vars to (lo, hi)."""
    if isinstance(e, int):
        return e, e
    if isinstance(e, Const):
        return (e.value, e.value) if not e.dtype.is_float else (-INF, INF)
    if isinstance(e, Var):
        return env.get(e, (-INF, INF))
    if isinstance(e, Cast) and e.value.dtype.is_int:
        return bounds(e.value, env)
    if isinstance(e, Unary) and e.op == "neg":
        lo, hi = bounds(e.a, env)
        return -hi, -lo
    if isinstance(e, Binary):
        alo, ahi = bounds(e.a, env)
        blo, bhi = bounds(e.b, env)
        if e.op == "+":
            return alo + blo, ahi + bhi
        if e.op == "-":
            return alo - bhi, ahi - blo
        if e.op == "*":
            cands = [x * y for x in (alo, ahi) for y in (blo, bhi)
                     if not ((x in (INF, -INF) and y == 0) or (y in (INF, -INF) and x == 0))]
            return (min(cands), max(cands)) if cands else (-INF, INF)
        if e.op in ("//", "/") and blo == bhi and blo not in (0, INF, -INF) and blo > 0:
            lo = alo // blo if alo not in (INF, -INF) else alo
            hi = ahi // blo if ahi not in (INF, -INF) else ahi
            return lo, hi
        if e.op == "%" and blo == bhi and isinstance(blo, int) and blo > 0:
            if alo >= 0 and ahi < blo:
                return alo, ahi
            return 0, blo - 1
        if e.op == "min":
            return min(alo, blo), min(ahi, bhi)
        if e.op == "max":
            return max(alo, blo), max(ahi, bhi)
        if e.op == "&" and blo == bhi and blo >= 0:
            return 0, blo
        if e.op == ">>" and blo == bhi and alo >= 0:
            return alo >> int(blo) if alo != INF else alo, ahi >> int(bhi) if ahi != INF else ahi
    return -INF, INF


def divisible(e, n: int) -> bool:
    """True when the integer expression `e` is provably a multiple of `n`."""
    if n == 1:
        return True
    lin = linear(e)
    if lin is None:
        return False
    c, terms = lin
    if c % n:
        return False
    for atom, coef in terms.items():
        if coef % n == 0:
            continue
        if isinstance(atom, Binary) and atom.op == "*":
            # a product of non-linear factors: divisible if any constant factor is
            if any(isinstance(x, Const) and x.value % n == 0 for x in (atom.a, atom.b)):
                continue
        return False
    return True


def from_linear(c: int, terms: dict, dtype=None) -> Expr:
    """`c + sum(coef * atom)` as an expression (the inverse of `linear`); `dtype` types a bare constant."""
    out = None
    for atom, coef in terms.items():
        t = atom if coef == 1 else binary("*", atom, coef)
        out = t if out is None else binary("+", out, t)
    if out is None:
        return const(c, dtype) if dtype is not None else const(c)
    return binary("+", out, c) if c else out


def simplify_int(e):
    """Rebuild an integer expression from its linear form (collects like terms)."""
    lin = linear(e)
    if lin is None or not isinstance(e, Expr):
        return e
    return from_linear(*lin, e.dtype)

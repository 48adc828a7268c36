"""Global accesses that can never be inside their tensor.

Ragged edges are fine (transform/legalize_global_access.py guards them: a load outside reads 0, a
store or an atomic outside is dropped), but an access whose index is outside the tensor for every
block, thread and loop iteration -- `T.atomic_add(Out[j + 1000], v)` on a 64-element `Out` -- is a
mistake whose every effect would be dropped.  Loads, stores, atomics and tile-op regions get the same
check; under an `if`, the ranges of what its condition bounds (`i < n`, `bx * 16 + c < 32`, joined by
`and`) are narrowed first (an access under a condition that is never true is dead code, left alone).
"""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import Binary, Load, Mutator, Ref, Store, Var, collect
from ...ir.expr import Const
from ...ir.analysis import INF, bounds
from ...ir.printer import to_text
from ...ir.tileop import TileOp
from .walker import Walker


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _narrow(cond, env: dict, stand_ins: dict | None = None) -> None:
    """Narrow `env` (Var -> (lo, hi)) by what `cond` being true says: its conjuncts `v < e`,
    `v <= e`, `v > e`, `v >= e`, `v == e` (either side) with v a variable -- or, given `stand_ins`
    (expression text -> Var), a compound integer expression standing in as one -- and e of known
    bounds; any other conjunct narrows nothing."""
    if isinstance(cond, Binary) and cond.op == "and":
        _narrow(cond.a, env, stand_ins)
        _narrow(cond.b, env, stand_ins)
        return
    if isinstance(cond, Binary) and cond.op in (*_FLIP, "=="):
        for v, op, e in ((cond.a, cond.op, cond.b), (cond.b, _FLIP.get(cond.op, "=="), cond.a)):
            if not isinstance(v, Var) and v.dtype.is_int and stand_ins is not None and not isinstance(v, Const):
                # `i1 * 32 + ko < 32`: a stand-in variable for the compound side, which the access's
                # index may hold as a sub-expression (`i1 * 32 + ko + 32`, _Accesses._named)
                key = to_text(v)
                if key not in stand_ins:
                    stand_ins[key] = Var(f"({key})", v.dtype)
                if stand_ins[key] not in env:
                    env[stand_ins[key]] = bounds(v, env)
                v = stand_ins[key]
            if isinstance(v, Var) and v.dtype.is_int:
                elo, ehi = bounds(e, env)
                lo, hi = env.get(v, (-INF, INF))
                if op == "<" and ehi != INF:
                    hi = min(hi, ehi - 1)
                elif op == "<=" and ehi != INF:
                    hi = min(hi, ehi)
                elif op == ">" and elo != -INF:
                    lo = max(lo, elo + 1)
                elif op == ">=" and elo != -INF:
                    lo = max(lo, elo)
                elif op == "==":
                    lo, hi = max(lo, elo), min(hi, ehi)
                else:
                    continue
                env[v] = (lo, hi)
                return


class _Accesses(Walker):
    def __init__(self, target):
        super().__init__(target)
        self.stand_ins: dict = {}

    def visit_If(self, s):
        """The condition narrows the ranges in the then-branch only (in the else-branch it is false)."""
        self.visit(s.cond)
        for branch, guard in ((s.then, s.cond), (s.orelse, None)):
            if branch is None:
                continue
            self.guards.append(guard)
            try:
                self.visit(branch)
            finally:
                self.guards.pop()

    def _named(self, exprs) -> tuple:
        """`exprs` with every sub-expression a guard bounds (a compound side of a comparison) replaced by
        its stand-in variable."""
        if not self.guards:
            return tuple(exprs)
        self.stand_ins = {}
        for g in self.guards:
            if g is not None:
                _narrow(g, {}, self.stand_ins)
        if not self.stand_ins:
            return tuple(exprs)
        subs = self.stand_ins

        class _Name(Mutator):
            def generic(self, n):
                if isinstance(n, Binary) and to_text(n) in subs:
                    return subs[to_text(n)]
                return Mutator.generic(self, n)
        return tuple(_Name().visit(e) for e in exprs)

    def _guarded_env(self, exprs):
        """The variables' ranges where the access runs: narrowed by what the enclosing ifs say in a form
        the ranges model; a condition they do not model (a data-dependent one) leaves them wider, which
        only makes "never inside" harder to prove."""
        if not self.guards:
            return self.env
        env = dict(self.env)
        for g in self.guards:
            if g is not None:
                _narrow(g, env, dict(self.stand_ins))
        return env

    def _check(self, what, buf, starts, extents, node):
        if buf.scope != "global":
            return
        starts = self._named(starts)
        env = self._guarded_env(starts)
        if any(lo > hi for lo, hi in env.values()):   # a guard never true: dead code
            return
        for d, (start, ext, size) in enumerate(zip(starts, extents, buf.shape)):
            if not isinstance(size, int):   # a dynamic dimension (the others are still checked)
                continue
            lo, hi = bounds(start, env)
            if lo == -INF or hi == INF:
                continue
            if lo >= size or hi + ext - 1 < 0:
                raise TilecraftError(
                    f"{what} is never inside {buf.name} (shape {tuple(buf.shape)}): its index in dimension {d} "
                    f"runs from {lo} to {hi + ext - 1}, but the dimension has size {size}",
                    getattr(node, "span", None) or self.span,
                    hint="every element it would touch is outside the tensor, so all of its effect would be dropped")

    def visit_Load(self, e: Load):
        self._check(f"the load {to_text(e)}", e.buffer, e.indices, (1,) * len(e.indices), e)
        self.generic(e)

    def visit_Ref(self, e: Ref):
        self._check(f"the element {to_text(e)}", e.buffer, e.indices, (1,) * len(e.indices), e)
        self.generic(e)

    def visit_Store(self, s: Store):
        self._check(f"the store to {s.buffer.name}[{', '.join(to_text(i) for i in s.indices)}]",
                    s.buffer, s.indices, (1,) * len(s.indices), s)
        self.generic(s)

    def visit_TileOp(self, op: TileOp):
        name = type(op).__name__
        what = "T.atomic_" + op.kind if name == "AtomicAdd" else f"T.{name.lower()}"
        for region in op.reads() + op.writes():
            buf = getattr(region, "buffer", None)
            if buf is not None:
                self._check(f"{what} on {to_text(region)}", buf, region.starts, region.extents, op)
        self.generic(op)


def check_accesses(func, target) -> None:
    _Accesses(target).visit(func.body)

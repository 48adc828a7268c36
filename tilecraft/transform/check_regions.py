"""Reject on-chip accesses that can never be valid, at the user's line.

Before and after: the same IR (this pass only checks).  Shared, fragment and local tiles have no
bounds guards (they are registers and shared memory, where an out-of-range access silently
corrupts other data), so every tile-op region and every element index on them must provably lie
inside the buffer.  Global tensors are exempt: their ragged edges are guarded later.
"""
from __future__ import annotations

from ..errors import TilecraftError
from ..ir import Binary, Cast, Const, For, If, Kernel, Let, Load, Store, Var, Visitor, binary, const
from ..ir.analysis import INF, bounds, linear
from ..ir.func import PrimFunc
from ..ir.tileop import TileOp


class _Check(Visitor):
    def __init__(self):
        self.env = {}
        self.span = None
        self.kernel = None
        self.guards: list = []  # (var, U): inside `if var < U:` (var <= U - 1), innermost last

    def visit_Kernel(self, k: Kernel):
        self.kernel = k
        for v, g in zip(k.block_vars, k.grid):
            self.env[v] = (0, bounds(g, self.env)[1] - 1)
        for v, t in zip(k.thread_vars, k.threads):
            self.env[v] = (0, t - 1)
        Visitor.generic(self, k)

    def visit_If(self, s: If):
        """Inside a branch, the variables its condition bounds are bounded (`if tx >= 256:` ...
        `s[(tx - 256) // 8]`): comparisons of a variable with a constant, joined by `and`."""
        self.visit(s.cond)
        for branch, truth in ((s.then, True), (s.orelse, False)):
            if branch is None:
                continue
            saved = dict(self.env)
            _narrow(self.env, s.cond, truth)
            pushed = _upper_guards(s.cond) if truth else []
            self.guards += pushed
            self.visit(branch)
            del self.guards[len(self.guards) - len(pushed):]
            self.env = saved

    def _guarded_hi(self, idx, hi):
        """A tighter upper bound of `idx` from the enclosing `if x < U` guards with U an expression:
        with idx = c*x + rest (c > 0), idx <= c*(U - 1) + rest, whose terms may cancel
        (`if tx < R - off: s[tx + off]`, TileLang's top-k selector)."""
        li = linear(idx)
        if li is None:
            return hi
        for x, upper in self.guards:
            c = li[1].get(x, 0)
            lu = linear(upper)
            if c <= 0 or lu is None:
                continue
            terms = {k: v for k, v in li[1].items() if k is not x}
            for k, v in lu[1].items():
                terms[k] = terms.get(k, 0) + c * v
            e = const(li[0] + c * (lu[0] - 1))
            for k, v in terms.items():
                if v:
                    e = binary("+", e, binary("*", k, v) if v != 1 else k)
            hi = min(hi, bounds(e, self.env)[1])
        return hi

    def visit_WarpGroupScope(self, s):
        """`with T.ws(g):` -- the flat thread index is in the branch's warp groups."""
        saved = dict(self.env)
        x = self.kernel.thread_vars[0] if self.kernel is not None and self.kernel.thread_vars else None
        if x is not None and tuple(self.kernel.threads[1:]) in ((), (1,), (1, 1)):
            lo, hi = self.env[x]
            first, end = s.bounds(self.kernel.num_threads)
            self.env[x] = (max(lo, first), min(hi, end - 1))
        self.visit(s.body)
        self.env = saved

    def visit_For(self, f: For):
        lo, hi = bounds(f.start, self.env)
        self.env[f.var] = (lo, hi + bounds(f.extent, self.env)[1] - 1)
        Visitor.generic(self, f)

    def visit_Let(self, s: Let):
        Visitor.generic(self, s)
        if s.var.dtype.is_int:
            self.env[s.var] = bounds(s.value, self.env)

    def _check_index(self, buf, indices, node):
        if buf.scope == "global":
            return
        for d, (idx, size) in enumerate(zip(indices, buf.shape)):
            lo, hi = bounds(idx, self.env)
            if hi != INF and hi >= size and self.guards:
                hi = self._guarded_hi(idx, hi)
            if (hi != INF and hi >= size) or (lo != -INF and lo < 0):
                raise TilecraftError(
                    f"index out of range: {buf.name} ({buf.scope}, shape {tuple(buf.shape)}) is indexed "
                    f"in dimension {d} with values from {lo} to {hi}, but the dimension has size {size}",
                    node.span or self.span)

    def visit_Load(self, e: Load):
        self._check_index(e.buffer, e.indices, e)
        Visitor.generic(self, e)

    def visit_Store(self, s: Store):
        self.span = s.span
        self._check_index(s.buffer, s.indices, s)
        Visitor.generic(self, s)

    def visit_TileOp(self, op: TileOp):
        self.span = op.span
        for region in op.reads() + op.writes():
            buf = getattr(region, "buffer", None)
            if buf is None or buf.scope == "global":
                continue
            for d, (start, ext, size) in enumerate(zip(region.starts, region.extents, buf.shape)):
                lo, hi = bounds(start, self.env)
                if ext > size or (hi != INF and hi + ext > size) or (lo != -INF and lo < 0):
                    raise TilecraftError(
                        f"region out of range: {buf.name} ({buf.scope}, shape {tuple(buf.shape)}) is "
                        f"accessed in dimension {d} from {lo} to {hi + ext - 1 if hi != INF else 'unbounded'} "
                        f"(extent {ext}), but the dimension has size {size}", op.span)
        Visitor.generic(self, op)


def _upper_guards(cond) -> list:
    """(var, U) for each conjunct `var < U` / `var <= U` / `U > var` / `U >= var` of an if's condition."""
    while isinstance(cond, Cast):
        cond = cond.value
    if isinstance(cond, Binary) and cond.op in ("and", "&") and cond.dtype.is_bool:
        return _upper_guards(cond.a) + _upper_guards(cond.b)
    if not isinstance(cond, Binary):
        return []
    op, a, b = cond.op, cond.a, cond.b
    if op in (">", ">="):
        op, a, b = {">": "<", ">=": "<="}[op], b, a
    if op == "<" and isinstance(a, Var) and a.dtype.is_int:
        return [(a, b)]
    if op == "<=" and isinstance(a, Var) and a.dtype.is_int:
        return [(a, binary("+", b, 1))]
    return []


_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _narrow(env: dict, cond, truth: bool) -> None:
    """Tighten `env` with what `cond` being `truth` says about single variables."""
    while isinstance(cond, Cast):
        cond = cond.value
    if not isinstance(cond, Binary):
        return
    if (cond.op == "and" and truth) or (cond.op == "or" and not truth):
        _narrow(env, cond.a, truth)
        _narrow(env, cond.b, truth)
        return
    if cond.op in ("and", "or"):   # `elif`: not (a and b) with a known to hold says not b
        for known, other in ((cond.a, cond.b), (cond.b, cond.a)):
            if _holds(env, known, cond.op == "and"):
                _narrow(env, other, truth)
                return
        return
    op, v, c = cond.op, cond.a, cond.b
    if isinstance(v, Const) and isinstance(c, Var):
        op, v, c = _FLIP.get(op, op), c, v
    if op not in _NEGATE or not isinstance(v, Var) or v not in env or not isinstance(c, Const):
        return
    op = op if truth else _NEGATE[op]
    k = int(c.value) if float(c.value).is_integer() else None
    if k is None:
        return
    lo, hi = env[v]
    new = {"<": (lo, min(hi, k - 1)), "<=": (lo, min(hi, k)), ">": (max(lo, k + 1), hi),
           ">=": (max(lo, k), hi), "==": (max(lo, k), min(hi, k))}.get(op)
    if new is not None and new[0] <= new[1]:
        env[v] = new


def _holds(env: dict, cond, truth: bool) -> bool:
    """Whether `cond` is provably `truth` under `env` (a comparison of a variable with a constant)."""
    while isinstance(cond, Cast):
        cond = cond.value
    if not isinstance(cond, Binary) or cond.op not in _NEGATE:
        return False
    v = cond.a if isinstance(cond.a, Var) else cond.b
    if not isinstance(v, Var) or v not in env:
        return False
    op, c = (cond.op, cond.b) if v is cond.a else (_FLIP[cond.op], cond.a)
    if not isinstance(c, Const):
        return False
    op = op if truth else _NEGATE[op]
    k, (lo, hi) = c.value, env[v]
    return {"<": hi < k, "<=": hi <= k, ">": lo > k, ">=": lo >= k, "==": lo == hi == k,
            "!=": k < lo or k > hi}[op]


def check_regions(func: PrimFunc, ctx) -> PrimFunc:
    _Check().visit(func.body)
    return func

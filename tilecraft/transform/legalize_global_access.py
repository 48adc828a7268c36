"""Guard every global-memory access that may fall outside its tensor.

Before: element loads, stores and atomics on global buffers, unguarded (user `T.Parallel` code
and lowered copies alike).  After: a store or atomic whose indices are not provably in bounds is
wrapped in `if (in bounds)`, and such a load becomes `in bounds ? load : 0` (or the tensor's
`T.annotate_safe_value`; a store into a tile with a `T.annotate_padding` stores the padding where
any of its loads is out of range: ir/oob.py).  This is what makes ragged edges correct (SPEC §3):
the parts of a tile beyond a tensor are read as zeros and never written.  A device intrinsic
(ir/intrinsics) that writes global memory is skipped outside the same way; one declared `zfill`
(cp.async, vector loads, converting vector copies) takes the bounds of its global *reads* as its
trailing predicate operand (out-of-range vectors read as zeros, not skipped).  A call that is not
`zfill` and reads global memory that may be outside into registers or shared memory is refused as a
compiler bug: skipping it would leave its destination stale where the program means zeros.  Proofs
use interval analysis over block indices, loop variables and lets, so the common, aligned case
carries no guard at all.
"""
from __future__ import annotations

from ..errors import InternalCompilerError
from ..ir import (Binary, Call, collect, Const, Evaluate, Expr, For, If, Kernel, Let, Load, Mutator, Ref, Select, Store,
                  Var, binary, cast, const)
from ..ir.analysis import bounds
from ..ir.expr import TID, BuiltinVar
from ..ir.func import PrimFunc
from ..ir.intrinsics import IntrinsicCall
from ..ir.intrinsics.base import PTR, READ, READ_WRITE, WRITE
from ..ir.oob import out_of_bounds


def in_bounds_condition(buf, indices, env) -> Expr | None:
    """The condition that `indices` lie inside `buf`, or None when provably always true."""
    cond = None
    for idx, size in zip(indices, buf.shape):
        lo, hi = bounds(idx, env)
        checks = []
        if lo < 0:
            checks.append(binary(">=", idx, 0))
        size_hi = size if isinstance(size, int) else None
        if size_hi is None or hi >= size_hi:
            checks.append(binary("<", idx, size if isinstance(size, int) else size))
        for c in checks:
            cond = c if cond is None else binary("and", cond, c)
    return cond


def _narrow(cond, env):
    """(v, highest value of v where `cond` holds) for cond = `v < n` or `v + c < n` with v a bound
    loop variable and n, c constants; else None."""
    if not (isinstance(cond, Binary) and cond.op == "<" and isinstance(cond.b, Const) and cond.b.dtype.is_int):
        return None
    lhs, c = cond.a, 0
    if isinstance(lhs, Binary) and lhs.op == "+" and isinstance(lhs.b, Const) and lhs.b.dtype.is_int:
        lhs, c = lhs.a, lhs.b.value
    if not (isinstance(lhs, Var) and lhs in env and lhs.dtype.is_int):
        return None
    return lhs, cond.b.value - 1 - c


class _Legalize(Mutator):
    def __init__(self, symbol_env, oob):
        super().__init__()
        self.env = dict(symbol_env)
        self.oob = oob
        self.guards = None  # while visiting a store into a padded tile: its loads' in-bounds conditions

    def visit_Kernel(self, k: Kernel):
        for v, g in zip(k.block_vars, k.grid):
            _, hi = bounds(g, self.env)
            self.env[v] = (0, hi - 1)
        for v, t in zip(k.thread_vars, k.threads):
            self.env[v] = (0, t - 1)
        for v in collect(k.body, lambda n: isinstance(n, BuiltinVar) and n.name == TID):
            self.env[v] = (0, k.num_threads - 1)  # the flat thread index the CUDA lowering introduced
        return Mutator.generic(self, k)

    def visit_For(self, f: For):
        slo, shi = bounds(f.start, self.env)
        _, ehi = bounds(f.extent, self.env)
        self.env[f.var] = (slo, shi + ehi - 1)
        return Mutator.generic(self, f)

    def visit_If(self, s: If):
        """Inside `if (v + c < n)` (a pipelined loop's look-ahead guard) v is below n - c."""
        narrowed = _narrow(s.cond, self.env)
        if narrowed is None:
            return Mutator.generic(self, s)
        var, hi = narrowed
        saved = self.env[var]
        self.env[var] = (saved[0], min(saved[1], hi))
        then = self.visit(s.then)
        self.env[var] = saved
        orelse = self.visit(s.orelse) if s.orelse is not None else None
        return If(s.cond, then, orelse, span=s.span)

    def visit_Let(self, s: Let):
        out = Mutator.generic(self, s)
        if s.var.dtype.is_int:
            self.env[s.var] = bounds(out.value, self.env)
        return out

    def visit_Load(self, e: Load):
        e2 = Mutator.generic(self, e)
        if e.buffer.scope != "global":
            return e2
        cond = in_bounds_condition(e.buffer, e2.indices, self.env)
        if cond is None:
            return e2
        if self.guards is not None:
            self.guards.append(cond)
        safe = self.oob.read_value(e.buffer)
        return Select(cond, e2, cast(0, e.buffer.dtype) if safe is None else safe, span=e.span)

    def visit_Store(self, s: Store):
        pad = self.oob.padding.get(s.buffer)
        if pad is None:
            s2 = Mutator.generic(self, s)
        else:  # a padded tile: where any load of the stored value is out of range, store the padding
            indices = tuple(self.visit(i) for i in s.indices)
            saved, self.guards = self.guards, []
            try:
                value, guards = self.visit(s.value), self.guards
            finally:
                self.guards = saved
            if guards:
                inside = guards[0]
                for g in guards[1:]:
                    inside = binary("and", inside, g)
                value = Select(inside, value, cast(pad, s.buffer.dtype), span=s.span)
            s2 = Store(s.buffer, indices, value, span=s.span)
        if s.buffer.scope != "global":
            return s2
        cond = in_bounds_condition(s.buffer, s2.indices, self.env)
        return s2 if cond is None else If(cond, s2, span=s.span)

    def visit_Evaluate(self, s: Evaluate):
        s2 = Mutator.generic(self, s)
        c = s2.value
        if not isinstance(c, IntrinsicCall):
            return s2
        zfill = c.intrinsic.effects.zfill
        pred = guard = None   # pred: the reads of a zfill intrinsic (zeros outside); guard: skip the call outside
        for op, a in zip(c.intrinsic.operands, c.args):
            if not _global(a):
                continue
            cond = in_bounds_condition(a.buffer, a.indices, self.env)
            if cond is None:
                continue
            if zfill and op.access == READ:
                pred = cond if pred is None else binary("and", pred, cond)
                continue
            if op.access == READ and any(o.access in (WRITE, READ_WRITE) and not _global(b)
                                         for o, b in zip(c.intrinsic.operands, c.args) if o.kind == PTR):
                # skipping the call would leave what it fills from this read stale instead of zero
                raise InternalCompilerError(
                    f"{c.intrinsic.entry} reads {a.buffer.name} where it may be out of range but has no zero-fill "
                    f"predicate (declare Effects(zfill=True) and a PRED operand)", s.span)
            guard = cond if guard is None else binary("and", guard, cond)
        if zfill:
            s2 = _with_pred(s2, pred if pred is not None else const(True))
        return s2 if guard is None else If(guard, s2, span=s.span)


def _global(a) -> bool:
    return isinstance(a, Ref) and a.buffer.scope == "global"


def _with_pred(s: Evaluate, pred) -> Evaluate:
    c = s.value
    return Evaluate(IntrinsicCall(c.intrinsic, c.args + (pred,), c.type, span=c.span), span=s.span)


def legalize_global_access(func: PrimFunc, ctx) -> PrimFunc:
    env = {}
    scalars = {id(v) for _, v in func.scalars}   # a scalar argument may be negative; a size may not
    for sym in func.symbols:
        top = 2 ** (sym.dtype.bits - 1) - 1 if sym.dtype.is_int and sym.dtype.bits == 64 else 2 ** 31 - 1
        env[sym] = (-top - 1, top) if id(sym) in scalars else (0, top)
    return func.with_body(_Legalize(env, out_of_bounds(func.body)).visit(func.body))

"""Re-base `T.Parallel` nests whose fragment is indexed at a uniform offset from the loop variables
(CUDA targets).

Before: a nest such as

    for i, j in T.Parallel(BS, D):
        if i < BS // 2:
            stage[i, j] = acc[i + s * (BS // 2), j]       # s: a serial loop variable

has no anchor (ir/semantics.parallel_anchor: no fragment indexed by exactly the loop variables),
so no thread owns an iteration.  After: the nest runs over the fragment's coordinates u instead,
with i = u - s * (BS // 2), and an iteration runs only where that i is inside the loop's range:

    for u, j in T.Parallel(BS, D):
        if 0 <= u - s * (BS // 2) < BS:
            if u - s * (BS // 2) < BS // 2:
                stage[u - s * (BS // 2), j] = acc[u, j]

The iterations run are exactly those whose element of `acc` exists (an iteration whose shifted
index falls outside the fragment would read past it), each by the thread that owns its element, so
the anchored lowering and layout inference apply unchanged.  Rewritten only when the nest has no
anchor, full or partial, and one fragment of the loop's shape is indexed in every dimension by
`loop variable + uniform offset` (uniform as in ir/semantics.mixed_dims); every other nest is left
as it is.  The CPU target needs no such pass: its fragments are whole arrays.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Const, For, If, Load, Mutator, Store, Var, binary, collect, const, same, substitute
from ..ir.expr import Binary, BuiltinVar
from ..ir.func import PrimFunc
from ..ir.semantics import parallel_anchor, partial_anchor


def _key(e):
    """A structural key of an index expression (two spellings of `s * 16` compare equal)."""
    if isinstance(e, Const):
        return ("c", e.value)
    if isinstance(e, Binary):
        return (e.op, _key(e.a), _key(e.b))
    return ("n", id(e))


def _uniform(e, loop_vars) -> bool:
    lv = {id(v) for v in loop_vars}
    return not collect(e, lambda n: id(n) in lv or isinstance(n, BuiltinVar) or
                       (isinstance(n, Load) and n.buffer.scope == "fragment"))


def _shift(idx, loop_vars):
    """(loop position, offset expression or None) when `idx` is `v`, `v + c`, `c + v` or `v - c`."""
    for k, v in enumerate(loop_vars):
        if idx is v:
            return k, None
    if isinstance(idx, Binary) and idx.op in ("+", "-"):
        for k, v in enumerate(loop_vars):
            if idx.a is v and _uniform(idx.b, loop_vars):
                return k, (idx.b if idx.op == "+" else binary("-", const(0), idx.b))
            if idx.op == "+" and idx.b is v and _uniform(idx.a, loop_vars):
                return k, idx.a
    return None


def _shifted_anchor(accesses, loop_vars, extents):
    """(buffer, per-dim (loop position, offset)) of the first fragment of the loop's shape indexed
    at uniform offsets from distinct loop variables, at least one offset nonzero; else None."""
    for buf, idx in accesses:
        if len(idx) != len(loop_vars):
            continue
        dims = [_shift(i, loop_vars) for i in idx]
        if any(d is None for d in dims) or len({k for k, _ in dims}) != len(loop_vars):
            continue
        if all(c is None for _, c in dims):
            continue
        if any(not same(buf.shape[d], extents[k]) for d, (k, _) in enumerate(dims)):
            continue
        return buf, dims
    return None


class _Rebase(Mutator):
    def visit_For(self, f: For):
        if f.kind != "parallel":
            return Mutator.generic(self, f)
        nest, cur = [], f
        while isinstance(cur, For) and cur.kind == "parallel":
            nest.append(cur)
            cur = cur.body
        body = self.visit(cur)
        vars_ = [n.var for n in nest]
        if any(not isinstance(n.extent, Const) or not isinstance(n.start, Const) or n.start.value != 0
               for n in nest):
            return _rebuild(nest, body)
        extents = [n.extent.value for n in nest]
        accesses = [(n.buffer, n.indices) for n in collect(body, lambda n: isinstance(n, (Load, Store)))
                    if n.buffer.scope == "fragment"]
        if parallel_anchor(accesses, vars_) is not None or partial_anchor(accesses, vars_) is not None:
            return _rebuild(nest, body)
        found = _shifted_anchor(accesses, vars_, extents)
        if found is None:
            return _rebuild(nest, body)
        buf, dims = found
        offset = {k: c for k, c in dims}
        new = [Var(v.name, v.dtype) for v in vars_]
        pattern = tuple(None if c is None else _key(c) for _, c in dims)
        coords = tuple(new[k] for k, _ in dims)

        class _Anchor(Mutator):
            """Accesses of the anchor at the same offsets index it by the new loop variables."""
            def _match(self, n):
                if n.buffer is not buf:
                    return False
                got = [_shift(i, vars_) for i in n.indices]
                return (all(g is not None for g in got) and [k for k, _ in got] == [k for k, _ in dims]
                        and tuple(None if c is None else _key(c) for _, c in got) == pattern)

            def visit_Load(self, e):
                return Load(buf, coords, span=e.span) if self._match(e) else Mutator.generic(self, e)

            def visit_Store(self, s):
                if self._match(s):
                    return Store(buf, coords, self.visit(s.value), span=s.span)
                return Mutator.generic(self, s)

        body = _Anchor().visit(body)
        old_of = {v: (new[k] if offset.get(k) is None else binary("-", new[k], offset[k]))
                  for k, v in enumerate(vars_)}
        body = substitute(body, old_of)
        guard = None
        for k, c in offset.items():
            if c is None:
                continue
            i = old_of[vars_[k]]
            ok = binary("and", binary(">=", i, const(0)), binary("<", i, const(extents[k])))
            guard = ok if guard is None else binary("and", guard, ok)
        body = If(guard, body, span=f.span)
        return _rebuild(nest, body, new)


def _rebuild(nest, body, new_vars=None):
    for n, v in zip(reversed(nest), reversed(new_vars or [n.var for n in nest])):
        if v is n.var and body is n.body:
            body = n
        else:
            body = replace(n, var=v, body=body)
    return body


def shift_parallel_anchors(func: PrimFunc, ctx) -> PrimFunc:
    return func.with_body(_Rebase().visit(func.body))

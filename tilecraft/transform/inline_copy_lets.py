"""Copies of a `T.Pipelined` loop whose source indices go through a name bound in the loop body get the
name's expression instead, so the copy can be issued for a later iteration.

TileLang programs often name a position before copying at it:

    for k in T.Pipelined(n_blocks, num_stages=2):
        pos = start + k * block_N
        T.copy(KV[bz, pos:pos + block_N, :], KV_shared)

`pos` is a `Let` in the loop body, so the copy's source depended on something computed inside the loop
and the loop ran unpipelined (pipelining/parts.py::producers), loads and compute in turn.  Before:
such copies name the Let's variable.  After: a top-level global -> shared copy of a pipelined loop
(num_stages >= 2) names, in place of each Let bound before it at the body's top level, that Let's value
(transitively), when the value reads no memory and no name bound inside the loop other than such Lets:
a function of the loop variable and of values fixed before the loop, so issuing the copy for iteration
t with the loop variable set to t reads exactly what the program's copy at iteration t would.  The
Lets stay (other statements may use them).  Loops the planner leaves alone are unchanged in effect.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Copy, For, Let, Load, Mutator, Seq, Var, collect, substitute
from ..ir.func import PrimFunc


def _inlined(loop: For) -> For:
    if not isinstance(loop.body, Seq):
        return loop
    bound = {s.var for s in collect(loop.body, lambda n: isinstance(n, Let))}
    pure: dict = {}             # Let var -> its value with earlier pure Lets inlined
    out, changed = [], False
    for s in loop.body.stmts:
        if isinstance(s, Let):
            value = substitute(s.value, pure) if pure else s.value
            uses = collect(value, lambda n: isinstance(n, (Var, Load)))
            if not any(isinstance(u, Load) or u in bound for u in uses):
                pure[s.var] = value
        elif (isinstance(s, Copy) and pure and s.src.buffer.scope == "global" and s.dst.buffer.scope == "shared"
              and any(v in pure for v in collect(s.src, lambda n: isinstance(n, Var)))):
            s = replace(s, src=substitute(s.src, pure))
            changed = True
        out.append(s)
    return replace(loop, body=replace(loop.body, stmts=tuple(out))) if changed else loop


class _Inline(Mutator):
    def visit_For(self, f: For):
        f = Mutator.generic(self, f)
        if f.kind == "pipelined" and f.annotation("num_stages", 0) >= 2:
            return _inlined(f)
        return f


def inline_copy_lets(func: PrimFunc, ctx) -> PrimFunc:
    body = _Inline().visit(func.body)
    return func if body is func.body else func.with_body(body)

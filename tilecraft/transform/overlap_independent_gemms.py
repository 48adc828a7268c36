"""Two independent wgmma gemms in a row issue back to back (sm_90a), each waited for only where its
accumulator is next used.

Before (each T.gemm completes before the next statement):

    g0: P0 = A0 @ B0        (wgmma, A/B shared)  issue, wait for it
    g1: P1 = A1 @ B1        (wgmma, A/B shared)  issue, wait for it
    use(P0) ...; use(P1) ...

After:

    issue g0; issue g1; wait until one group is in flight (g0 retired: P0 readable)
    use(P0) ...                          while g1 runs on the tensor cores
    wait for every group (P1 readable); use(P1) ...

so the work between the two uses (DeepSeek's block-scaled fp8 GEMM folds each 128-deep partial
product into the fp32 result with its scales) runs under the second gemm.  Register arithmetic that
does not touch P0 may stand between g0 and g1 (it then runs under g0: the block-scaled GEMM folds the
previous stage's second partial there, before g1 overwrites it).  The second wait goes
before the first statement after g1 that touches P1 or is anything but register arithmetic (a
shared-memory write, a barrier, an intrinsic, another gemm), and at the latest at the end of the
statement list, so no group is ever in flight across a barrier, a loop's back edge or a branch.

Applies when both gemms run on wgmma with B from shared memory and A from shared memory or from
registers (FlashAttention backward's dV += P^T dO and dK += dS^T Q: such a gemm packs its A fragments
into registers of its own, `held`, released after its wait, so the fragment may change while it runs),
neither is already kept in flight by a pipelined loop (`async_groups`), and g1 touches nothing of g0's
accumulator.  The sums
are the same instructions in the same order: only the waits move.  `pass_configs=
{"tc.overlap_independent_gemms": False}` turns it off.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Alloc, Evaluate, Gemm, Load, Mutator, Ref, Region, Seq, Store, Sync, collect, const
from ..ir import intrinsics as I
from ..ir.func import PrimFunc
from ..ir.lowering import WgmmaPlan, WgmmaRSPlan
from ..ir.tileop import TileOp
from .pipelining.overlap import held_registers


def _issuable(s) -> bool:
    """A synchronous wgmma gemm with B in shared memory and A in shared memory or (WgmmaRSPlan) in
    registers: the A fragments are packed into registers of their own when it is issued (`held`), so the
    fragment itself is free again at once."""
    return (isinstance(s, Gemm) and type(s.plan) in (WgmmaPlan, WgmmaRSPlan) and not s.async_groups
            and s.pipeline_hook is None and s.held is None and s.b.buffer.scope == "shared"
            and s.a.buffer.scope == ("shared" if type(s.plan) is WgmmaPlan else "fragment"))


def _in_flight(g: Gemm) -> tuple:
    """(the gemm left in flight, the statements that allocate its held registers, those that release
    them after its wait)."""
    if type(g.plan) is not WgmmaRSPlan:
        return replace(g, async_groups=1), (), ()
    held = held_registers(g)
    return (replace(g, async_groups=1, held=held), (Alloc(held),),
            (I.evaluate(I.WgmmaHoldFence(held.shape[0]), Ref(held, (const(0),))),))


def _buffers(s) -> set:
    return {n.buffer for n in collect(s, lambda n: isinstance(n, (Region, Load, Store, Ref)))}


def _register_only(s) -> bool:
    """Arithmetic on registers (shared and global memory read, nothing else written): no tile op, no
    intrinsic, no barrier, no store outside this thread's registers."""
    if collect(s, lambda n: isinstance(n, (TileOp, Evaluate, Sync))):
        return False
    return all(n.buffer.scope in ("local", "fragment") for n in collect(s, lambda n: isinstance(n, Store)))


def _wait(pending: int, buf, layouts) -> Evaluate:
    return I.evaluate(I.WgmmaWait(pending, layouts[buf].num_regs), Ref(buf, (const(0),)))


def _overlap(stmts: list, layouts) -> list | None:
    out, i, changed = [], 0, False
    while i < len(stmts):
        g0 = stmts[i]
        # register arithmetic that leaves g0's accumulator alone may stand between the two gemms: it
        # runs while g0 is in flight (a fold of the previous stage's partial, say)
        k = i + 1
        while k < len(stmts) and _issuable(g0) and not _issuable(stmts[k]) and _register_only(stmts[k]) \
                and g0.c.buffer not in _buffers(stmts[k]):
            k += 1
        g1 = stmts[k] if k < len(stmts) else None
        if not (_issuable(g0) and _issuable(g1) and g0.c.buffer not in _buffers(g1)
                and g0.plan.warpgroups == g1.plan.warpgroups
                and g0.c.buffer in layouts and g1.c.buffer in layouts):
            out.append(g0)
            i += 1
            continue
        rest = stmts[k + 1:]
        cut = next((j for j, s in enumerate(rest) if g1.c.buffer in _buffers(s) or not _register_only(s)), len(rest))
        (f0, alloc0, free0), (f1, alloc1, free1) = _in_flight(g0), _in_flight(g1)
        out += [*alloc0, *alloc1, f0, *stmts[i + 1:k], f1,
                _wait(1, g0.c.buffer, layouts), *free0, *rest[:cut], _wait(0, g1.c.buffer, layouts), *free1]
        i = k + 1 + cut
        changed = True
    return out if changed else None


class _Overlap(Mutator):
    def __init__(self, layouts):
        super().__init__()
        self.layouts = layouts

    def visit_Seq(self, s: Seq):
        s = self.generic(s)
        stmts = _overlap(list(s.stmts), self.layouts)
        return s if stmts is None else replace(s, stmts=tuple(stmts))


def overlap_independent_gemms(func: PrimFunc, ctx) -> PrimFunc:
    if not ctx.options.overlap_independent_gemms or getattr(ctx.target, "kind", None) != "cuda":
        return func
    if len(collect(func.body, _issuable)) < 2:
        return func
    body = _Overlap(func.lowering.fragment_layouts).visit(func.body)
    return func if body is func.body else func.with_body(body)

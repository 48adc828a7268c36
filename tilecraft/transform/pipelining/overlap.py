"""The overlapped consumer loop of a warp-specialized T.Pipelined loop with two gemms
(`WarpSpecialized(overlap=True)`): FlashAttention-3's intra-warpgroup overlap, for any loop body
of the shape

    pre(k); g1(k): S (+)= A @ B(k)   (wgmma, shared operands);   mid(k);   g2(k): O += P @ V(k)
    (wgmma with P from registers, the body's last statement)

where mid(k) = soft(k) + rest(k): soft is the longest prefix of mid that touches neither P nor O
(FlashAttention's online softmax), rest the remainder (O *= alpha; P = cast(S)).  The consumer runs

    k = 0:       wait tile 0; pre(0); issue g1(0); wait for it; soft(0); rest(0)
    k = 1..n-1:  wait tile k; pre(k); issue g1(k); issue g2(k-1); wait for g1(k) (one group left);
                 soft(k) while g2(k-1) runs on the tensor cores; wait for g2(k-1); release the
                 stage of tile k-1; rest(k)
    then:        g2(n-1)

g2(k-1) moves past pre(k), g1(k) and soft(k), which is legal when those touch no shared memory but
g1's operands and neither P nor O (checked by `overlap_parts`).  With one ring of stages for all the
loop's copies, a tile's stage is released one iteration later than before, so the form needs three
stages to keep a load in flight (on the H200 the hand-written form ran 8% faster with three stages
and 34% slower with two: benchmarks/results/2026-11-30_h200_s7_fa_overlap.md).  When the copies split
into the tiles only g1 reads and those only g2 reads (`ring_split`: FlashAttention's K and V), each
group gets its own ring and g1's stage is released as soon as g1(k) retires, so two stages suffice.

With two or more consumer warpgroups the gemm issues of an iteration (and of k = 0) are also taken in
turns (FlashAttention-3's ping-pong, `tc.overlap_pingpong`): warpgroup g waits for its turn, issues,
and passes the turn on, so the tensor cores run one warpgroup's gemms while the other's softmax runs.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...ir import (Alloc, Buffer, For, Gemm, If, Load, Ref, Region, Store, binary, collect, const, seq,
                  substitute, dtype as dt)
from ...ir import intrinsics as I
from ...ir.expr import Const
from ...ir.lowering import WgmmaPlan, WgmmaRSPlan


def held_registers(g: Gemm) -> Buffer:
    """The registers a wgmma gemm with A from registers packs its A fragments into when it is left in
    flight (tc::gemm_rs_sm90_async's `held`: m/wg/64 * k/16 * 4 of this thread's)."""
    m, _, k = g.mnk
    count = m // g.plan.warpgroups // 64 * (k // 16) * 4
    return Buffer(f"{g.c.buffer.name}_held", (count,), dt.uint32, "local", span=g.span)


@dataclass(frozen=True)
class OverlapParts:
    pre: tuple
    g1: Gemm
    soft: tuple
    rest: tuple
    g2: Gemm


def _buffers(stmts) -> set:
    """Every buffer the statements read or write."""
    nodes = [n for s in stmts for n in collect(s, lambda n: isinstance(n, (Region, Load, Store, Ref)))]
    return {n.buffer for n in nodes}


def overlap_parts(body) -> OverlapParts | None:
    """The parts of a consumer loop body (a Seq of tile ops, stages already substituted) that the
    overlapped form reorders, or None when the body does not have the shape or the reordering
    could change a result."""
    stmts = list(body.stmts) if hasattr(body, "stmts") else [body]
    gemms = [i for i, s in enumerate(stmts) if collect(s, lambda n: isinstance(n, Gemm))]
    if len(gemms) != 2 or gemms[1] != len(stmts) - 1:
        return None
    i1, i2 = gemms
    g1, g2 = stmts[i1], stmts[i2]
    if not (isinstance(g1, Gemm) and isinstance(g2, Gemm) and isinstance(g1.plan, WgmmaPlan)
            and isinstance(g2.plan, WgmmaRSPlan) and g2.b.buffer.scope == "shared" and not g2.clear_accum):
        return None
    if g1.async_groups or g2.async_groups:
        return None
    held = {g2.a.buffer, g2.c.buffer}
    mid = stmts[i1 + 1:i2]
    cut = next((j for j, s in enumerate(mid) if _buffers([s]) & held), len(mid))
    pre, soft, rest = stmts[:i1], mid[:cut], mid[cut:]
    if not soft:
        return None  # nothing to overlap g2 with
    early = _buffers(pre + soft)
    if early & held or g1.c.buffer in held or any(b.scope == "shared" for b in early):
        return None
    return OverlapParts(tuple(pre), g1, tuple(soft), tuple(rest), g2)


def ring_split(parts: OverlapParts, staged_of: dict) -> tuple | None:
    """(g1's copies, g2's copies) when every producer copy of the loop (`staged_of`: copy -> the
    staged shared tile it fills) fills a tile that only g1 or only g2 reads: those then get a ring of
    stages each, and g1's tile is released as soon as g1 retires.  None otherwise."""
    a_bufs = {x.buffer for x in (parts.g1.a, parts.g1.b) if x.buffer.scope == "shared"}
    b_buf = parts.g2.b.buffer
    first, second = [], []
    for c, buf in staged_of.items():
        if buf in a_bufs and buf != b_buf:
            first.append(c)
        elif buf == b_buf and buf not in a_bufs:
            second.append(c)
        else:
            return None
    if not first or not second or _buffers(parts.rest) & set(staged_of.values()):
        return None
    return first, second


def overlapped_loop(ko, n, parts: OverlapParts, wait, release, nacc, turns: bool) -> object:
    """The consumer loop of the module docstring.  `wait(i, t)` waits for tile t's stage of the
    copies g1 (i = 0) or g2 (i = 1) reads, `release(i, t)` gives it back to the producer; with one
    ring for both, `wait(1, t)` and `release(0, t)` are None (tile k's stage is then released after
    g2(k) retires).  `nacc(buffer)` is a fragment's register count.  `turns`: the consumer
    warpgroups issue their gemms in turn (ping-pong)."""
    p = parts
    wg = p.g1.plan.warpgroups
    turns = turns and wg == p.g2.plan.warpgroups and 2 <= wg <= 4

    def turn(*issue):  # the gemms of one warpgroup's turn
        if not turns:
            return issue
        return (I.evaluate(I.WgTurnWait(wg)), *issue, I.evaluate(I.WgTurnPass(wg)))

    def opt(stmt):
        return (stmt,) if stmt is not None else ()
    prev = binary("-", ko, 1)
    held = held_registers(p.g2)
    count = held.shape[0]
    g1 = replace(p.g1, async_groups=1)
    g2 = replace(substitute(p.g2, {ko: prev}), async_groups=1, held=held)
    body = seq(wait(0, ko), *p.pre, *opt(wait(1, prev)), *turn(g1, g2),
               I.evaluate(I.WgmmaWait(1, nacc(p.g1.c.buffer)), Ref(p.g1.c.buffer, (const(0),))),
               *opt(release(0, ko)), *p.soft,
               I.evaluate(I.WgmmaWait(0, nacc(p.g2.c.buffer)), Ref(p.g2.c.buffer, (const(0),))),
               I.evaluate(I.WgmmaHoldFence(count), Ref(held, (const(0),))),
               release(1, prev), *p.rest)
    wait_s = I.evaluate(I.WgmmaWait(0, nacc(p.g1.c.buffer)), Ref(p.g1.c.buffer, (const(0),)))
    first = substitute(seq(wait(0, ko), *p.pre, *turn(g1), wait_s, *opt(release(0, ko)), *p.soft, *p.rest),
                       {ko: const(0)})
    last_tile = binary("-", n, 1)
    last = seq(*opt(wait(1, last_tile)), substitute(p.g2, {ko: last_tile}))
    init = [I.evaluate(I.WgTurnInit(wg))] if turns else []
    out = seq(Alloc(held), *init, first, For(ko, const(1), binary("-", n, 1), "serial", body), last)  # k = 1 .. n-1
    return out if isinstance(n, Const) and n.value >= 1 else If(binary("<", const(0), n), out)

"""Where a warp-specialized T.Pipelined loop goes (a part of pipeline_copies, kept apart for size).

pipeline_copies builds a warp-specialized loop as a `Split`: the producer (one thread of an extra
warpgroup issuing TMA loads), the consumer loop, the barriers' set-up and clean-up, and the
unsplit loop to fall back to.  `place_warp_specialized` then rebuilds the kernel around it as one
`WarpSpecialize` node: shared allocations, barrier set-up and the Lets the producer may need come
first (both roles see them); the consumer role is everything else of the kernel, in order.
`register_budgets` picks the setmaxnreg budgets of the two roles (none after
`T.disable_warp_group_reg_alloc()`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir import Alloc, Annotate, Kernel, Load, Seq, Stmt, WarpSpecialize, collect, seq
from ..ir.hopper import REGISTER_FILE, WARP_GROUP


@dataclass(frozen=True, eq=False)
class Split(Stmt):
    """A warp-specialized loop waiting to be placed at its kernel's top level."""
    head: list
    producer: Stmt
    consumer: Stmt
    tail: list
    fallback: Stmt
    threads: int
    note: int    # index of the loop's plan note


def flat(s) -> list:
    return [x for y in s.stmts for x in flat(y)] if isinstance(s, Seq) else [s]


def register_budgets(threads: int) -> tuple:
    """(producer, consumer) setmaxnreg budgets for `threads` consumer threads plus one producer
    warpgroup, or (0, 0) when one consumer warpgroup can already have every register it may use.
    The block holds cap = 65536 / (threads + 128) registers per thread at launch (rounded down to
    8); the producer gives its share to the consumers: 24 + WG * consumer <= (WG + 1) * cap."""
    wg = threads // 128
    if wg < 2:
        return 0, 0
    cap = REGISTER_FILE // (threads + WARP_GROUP) // 8 * 8
    return 24, min(256, ((wg + 1) * cap - 24) // wg // 8 * 8)


def place_warp_specialized(k: Kernel, notes: list, unsplit_notes: dict) -> Kernel:
    """Split the kernel around its warp-specialized loop: shared allocations, the barriers' set-up
    and the Lets the producer needs come first (both roles see them), then the producer and, as
    the consumer, everything else in order.  When the producer would need a value computed by a
    statement it does not run, the loop stays unsplit (the TMA loop) and its note says why."""
    stmts = flat(k.body)
    splits = [i for i, s in enumerate(stmts) if isinstance(s, Split)]
    if not splits:
        return k
    i = splits[0]
    sp = stmts[i]
    before, after = stmts[:i], stmts[i + 1:]
    shared = [s for s in before if isinstance(s, Alloc) and s.buffer.scope == "shared"]
    lets = [s for s in before if type(s).__name__ == "Let"]
    # Lets move ahead of the statements before them: only those that read nothing those write
    if any(collect(s.value, lambda n: isinstance(n, Load) and n.buffer.scope != "global") for s in lets):
        for split, unsplit in unsplit_notes.items():
            notes[sp.note] = notes[sp.note].replace(
                split, unsplit + " (not warp-specialized: the loads need values the kernel computes "
                "before the loop)")
        return replace(k, body=seq(*[sp.fallback if s is sp else s for s in stmts]))
    rest = [s for s in before if s not in shared and s not in lets]
    producer_regs, consumer_regs = register_budgets(sp.threads)
    if collect(k.body, lambda n: isinstance(n, Annotate) and n.key == "no_set_max_nreg"):
        producer_regs, consumer_regs = 0, 0  # T.disable_warp_group_reg_alloc(): budgets as launched
    ws = WarpSpecialize(sp.producer, seq(*rest, sp.consumer, *after), sp.threads, producer_regs, consumer_regs)
    return replace(k, body=seq(*shared, *lets, *sp.head, ws, *sp.tail))

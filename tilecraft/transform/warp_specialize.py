"""Where a warp-specialized T.Pipelined loop goes (a part of pipeline_copies, kept apart for size).

pipeline_copies builds a warp-specialized loop as a `Split`: the producer (one thread of an extra
warpgroup issuing TMA loads), the consumer loop, the barriers' set-up and clean-up, and the
unsplit loop to fall back to.  `place_warp_specialized` then rebuilds the kernel around it as one
`WarpSpecialize` node: shared allocations, barrier set-up and the Lets the producer may need come
first (both roles see them); the consumer role is everything else of the kernel, in order.
`WarpSpecializedForms` holds pipeline_copies' warp-specialized loop forms (a mixin of its _Pipeline).
`register_budgets` picks the setmaxnreg budgets of the two roles (none after
`T.disable_warp_group_reg_alloc()`).

A loop with one consumer warpgroup (the README's 128x128 GEMM: threads=128) splits only as "two blocks
per SM" (`two_block_ring`): launched with __launch_bounds__(256, 2), the producer warpgroup drops to 24
registers and the consumer rises to 232, so the SM keeps the second block that the unsplit loop has;
its ring is at least 4 stages deep (a stage stays with the consumer for two iterations while its
wgmmas run, so 3 stages leave one loading) and its consumer loop is unrolled by the ring's depth (every
stage index, barrier address and parity a constant).  Measured on the H200 (benchmarks/results/
2026-12-01_h200_s10_ws_probes.md, fp16, median of 7 interleaved rounds): as generated before (one
block per SM) 0.64x cuBLAS; two blocks with the widened 64/3 ring 0.90x; 32/3 0.79-0.82x; 32/4
0.92-0.99x; 32/5 and 32/6 0.89x, unrolled 0.95-0.96x.  Against the unsplit (widened 64/3) loop in the
same races, means over seven machine starts: 4096^3 0.937x vs 0.941x, 8192^3 0.967x vs 0.976x (fp16);
bf16 (two starts) 2-3% behind.  So the split costs about 1% where the unsplit loop was measured, and
gives the SM its setmaxnreg-moved registers; `tc.warp_specialize: False` keeps the loop unsplit.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir import (Alloc, Annotate, Buffer, For, If, Kernel, Load, Ref, Region, Seq, Stmt, Store, Sync, Var,
                  WarpSpecialize, binary, collect, const, seq, substitute, dtype as dt)
from ..ir import intrinsics as I
from ..ir.expr import thread_index
from ..ir.hopper import BLOCK_SHARED_RESERVE, REGISTER_FILE, SHARED_PER_SM, WARP_GROUP
from .overlap_gemms import overlap_parts, overlapped_loop, ring_split

_call = I.evaluate


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
    blocks: int = 1   # blocks per SM the split is launched for (two_block_ring)


def flat(s) -> list:
    return [x for y in s.stmts for x in flat(y)] if isinstance(s, Seq) else [s]


def register_budgets(threads: int, blocks: int = 1) -> tuple:
    """(producer, consumer) setmaxnreg budgets for `threads` consumer threads plus one producer
    warpgroup, `blocks` blocks per SM, or (0, 0) when one consumer warpgroup of a block alone on its
    SM can already have every register it may use.  The block holds cap = 65536 / blocks /
    (threads + 128) registers per thread at launch (rounded down to 8); the producer gives its share
    to the consumers: 24 + WG * consumer <= (WG + 1) * cap."""
    wg = threads // WARP_GROUP
    if wg < 2 and blocks < 2:
        return 0, 0
    cap = REGISTER_FILE // blocks // (threads + WARP_GROUP) // 8 * 8
    return 24, min(256, ((wg + 1) * cap - 24) // wg // 8 * 8)


def shared_bytes_beside(kernel_body, loop, tiles) -> int:
    """Bytes of the shared buffers other than `tiles` that a top-level statement up to and including
    `loop` touches: what stays live beside the loop's ring (buffers first used after the loop, such
    as a staged epilogue's, may reuse the ring's bytes: plan_shared_memory)."""
    stmts = flat(kernel_body)
    upto = next((i for i, st in enumerate(stmts) if st is loop), len(stmts) - 1)
    shared = {a.buffer for a in collect(kernel_body, lambda n: isinstance(n, Alloc))
              if a.buffer.scope == "shared" and a.buffer not in tiles and a.buffer.is_static}
    live = {n.buffer for st in stmts[:upto + 1] if not isinstance(st, Alloc)
            for n in collect(st, lambda n: isinstance(n, (Region, Load, Ref, Store)))} & shared
    return sum(b.nbytes for b in live)


TWO_BLOCK_NOTE = "; two blocks per SM"   # how a two-block split's plan note goes on (_two_block_note)
TWO_BLOCK_STAGES = 4       # the shallowest ring measured at the unsplit loop's speed (module docstring)
TWO_BLOCK_ACCUM_REGS = 128  # the one accumulator size measured: 128x128 fp32 on one warpgroup


def two_block_ring(threads: int, accum_regs: int, stage_bytes: int, stages: int, other_bytes: int) -> int:
    """The ring depth of the "two blocks per SM" split of a one-warpgroup wgmma loop (module
    docstring), or 0 when it does not apply: `threads` consumer threads (one warpgroup), each holding
    `accum_regs` accumulator registers, a ring of `stages` stages of `stage_bytes`, and `other_bytes`
    of the block's other shared memory.  Smaller accumulators keep more than two blocks per SM
    unsplit, and were not measured split; a ring that leaves no room for a second block would keep
    the 0.64x one-block form."""
    if threads != WARP_GROUP or accum_regs != TWO_BLOCK_ACCUM_REGS:
        return 0
    depth = max(stages, TWO_BLOCK_STAGES)
    barriers = 2048   # full/empty mbarriers, each array on its own 1024-byte slot
    block = other_bytes + depth * stage_bytes + barriers + BLOCK_SHARED_RESERVE
    return depth if 2 * block <= SHARED_PER_SM else 0


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
        notes[sp.note] = notes[sp.note].split(TWO_BLOCK_NOTE)[0]   # the fallback launches one block of the program's threads
        for split, unsplit in unsplit_notes.items():
            notes[sp.note] = notes[sp.note].replace(
                split, unsplit + " (not warp-specialized: the loads need values the kernel computes "
                "before the loop)")
        return replace(k, body=seq(*[sp.fallback if s is sp else s for s in stmts]))
    rest = [s for s in before if s not in shared and s not in lets]
    producer_regs, consumer_regs = register_budgets(sp.threads, sp.blocks)
    if collect(k.body, lambda n: isinstance(n, Annotate) and n.key == "no_set_max_nreg"):
        producer_regs, consumer_regs = 0, 0  # T.disable_warp_group_reg_alloc(): budgets as launched
    ws = WarpSpecialize(sp.producer, seq(*rest, sp.consumer, *after), sp.threads, producer_regs, consumer_regs,
                        sp.blocks)
    return replace(k, body=seq(*shared, *lets, *sp.head, ws, *sp.tail))


class WarpSpecializedForms:
    """The warp-specialized forms of pipeline_copies._Pipeline (which this class is mixed into): it
    supplies the TMA loads and unsplit forms they fall back to (`_tma_loads`, `_tma_issue`,
    `_wgmma_tma`, `_plain_tma`, `_fed`, `_drained`) and the block's state (`threads`, `notes`,
    `layouts`, `overlap_pingpong`, `kernel_smem`, `kernel_body`, `smem_limit`, `_form`)."""

    def _ws_pays(self, lp, form: str) -> bool:
        """Whether "auto" warp-specializes this loop, as measured on the H200 (2026-11-30,
        benchmarks/NOTES.md session 4; the two-block form session 10): a loop body that is more than
        one async gemm (FlashAttention's) only when a block has its SM to itself anyway, and a
        one-gemm loop of one consumer warpgroup as two blocks per SM (`two_block_ring`).
        - The producer warpgroup and its register cap (one block per SM) cost a second block's
          latency hiding where one would fit: GEMM 128x128x64/3/256 0.68x cuBLAS split against
          0.90x unsplit; FlashAttention D64 128x128/2/256 0.83x SDPA against 0.94x.
        - A GEMM block alone on its SM (128x256x64/3/256) measured 0.93-0.97x split against
          0.96-1.00x unsplit: the unsplit loop's thread 0 already refills a stage while the async
          wgmmas run, and without a persistent tile scheduler there is no epilogue to hide.
        - FlashAttention D128 (128x128/2/256, alone on its SM) gained: 0.82 -> 0.87x full,
          0.83 -> 0.88x causal, its consumer warpgroups no longer meeting at a block barrier
          between the synchronous gemms and the softmax.
        - The README's GEMM (128x128x32/3/128) split as two blocks per SM with a 4-stage ring: fp16
          0.937x / 0.967x cuBLAS (4096^3 / 8192^3, means over seven machine starts) against
          0.941x / 0.976x unsplit in the same races (module docstring).
        `tc.warp_specialize: True` splits wherever it applies."""
        if form == "wgmma_tma":
            return lp.blocks == 2
        if form != "plain_tma":
            return False
        staged = sum((lp.stages - 1) * c.dst.buffer.nbytes for c in lp.producers)
        return 2 * (self.kernel_smem + staged) > self.smem_limit

    def _two_block_depth(self, written, loop, producers, stages: int) -> int:
        """The ring depth when this top-level loop (`written`: as in the kernel body; `loop`: its body
        rewritten) splits as two blocks per SM, else 0: a one-gemm wgmma loop fed by TMA (the form
        "wgmma_tma") and warp specialization asked for ("auto" or True)."""
        if self.warp_specialize not in ("auto", True):
            return 0
        body = loop.body.stmts if isinstance(loop.body, Seq) else (loop.body,)
        rest = [s for s in body if s not in producers]
        if self._form(rest, producers) != "wgmma_tma":
            return 0
        tiles = {c.dst.buffer for c in producers}
        return two_block_ring(self.threads, self.layouts[rest[0].c.buffer].num_regs, sum(t.nbytes for t in tiles),
                              stages, shared_bytes_beside(self.kernel_body, written, tiles))

    def _two_block_note(self, lp, asked: int) -> str:
        if lp.blocks != 2:
            return ""
        producer, consumer = register_budgets(self.threads, 2)
        deeper = f", the ring deepened from the program's {asked} stages" if lp.stages != asked else ""
        return (f"{TWO_BLOCK_NOTE} (__launch_bounds__({self.threads + WARP_GROUP}, 2), setmaxnreg "
                f"{producer}/{consumer}){deeper}, the consumer loop unrolled {lp.stages}x")

    def _ws_refusal(self, lp, form: str, top_level: bool) -> str:
        """Why "auto" leaves a TMA loop unsplit, for its plan note ('' when it was not asked to decide)."""
        if self.warp_specialize != "auto" or form not in ("wgmma_tma", "plain_tma"):
            return ""
        if not top_level:
            why = "the loop is not at the kernel's top level, or the block is not whole warpgroups in x"
        elif self.ws_taken:
            why = "an earlier loop of the kernel took the producer warpgroup"
        elif form == "wgmma_tma":
            why = ("a one-gemm loop ran faster unsplit on the H200 (128x256 tiles 1.00x cuBLAS against 0.94x split); "
                   "it splits only as two blocks per SM, for one consumer warpgroup of 128 accumulator registers a "
                   "thread with room for a 4-stage ring (128x128 fp16: 0.94x / 0.97x split, 0.94x / 0.98x unsplit)")
        else:
            why = "two blocks fit on an SM, and the split would keep one (FlashAttention D64: 0.94x SDPA against 0.83x)"
        # worded without "warp-specialized", which the notes of split loops (and tests) look for
        return f"; no producer warpgroup (tc.warp_specialize \"auto\": {why}; True splits it)"

    def _wgmma_ws(self, lp):
        """The TMA gemm loop split between a producer warpgroup and the consumers (module
        docstring): a consumer warp releases tile ko-1's stage once its wgmmas retired."""
        loads = self._tma_loads(lp)
        fallback = self._wgmma_tma(lp, loads)
        g = lp.gemm(async_groups=1, tma_fed=True)
        # unrolled by the ring's depth, every stage index, barrier address and parity is a constant: the
        # two-block form with 5 or 6 stages ran 0.89x cuBLAS rolled, 0.95-0.96x unrolled (module docstring)
        return self._ws(lp, loads, fallback, lambda wait_full, release: self._drained(
            lp, seq(wait_full, g, If(binary("<", const(0), lp.ko), release(binary("+", lp.ko, lp.stages - 1)))), g,
            unroll=lp.stages))

    def _plain_ws(self, lp):
        """Any TMA loop body split the same way: a consumer warp releases tile ko's stage after
        the body (whose gemms are synchronous), so consumer warpgroups no longer meet at a block
        barrier every iteration."""
        loads = self._tma_loads(lp)
        fallback = self._plain_tma(lp, loads)
        compute = self._fed(lp)
        return self._ws(lp, loads, fallback, lambda wait_full, release: seq(
            _call(I.FenceProxyAsyncShared()), Sync(), lp.loop(seq(wait_full, compute, release(lp.ko)))))

    def _overlap_ws(self, lp):
        """As _plain_ws, with the consumer loop of transform/overlap_gemms.py: each iteration's
        softmax runs while the previous iteration's second gemm does; g1's and g2's tiles on rings
        of their own when they split so (`ring_split`)."""
        loads = self._tma_loads(lp)
        fallback = self._plain_tma(lp, loads)
        parts = overlap_parts(self._fed(lp))
        nacc = lambda b: self.layouts[b].num_regs  # noqa: E731
        split = ring_split(parts, {c: lp.staged[c.dst.buffer] for c in lp.producers})
        head = (_call(I.FenceProxyAsyncShared()), Sync())
        if split is None:
            return self._ws(lp, loads, fallback, lambda wait_full, release: seq(*head, overlapped_loop(
                lp.ko, lp.n, parts, lambda i, t: substitute(wait_full, {lp.ko: t}) if i == 0 else None,
                lambda i, t: release(t) if i == 1 else None, nacc, self.overlap_pingpong)))
        rings = [[x for x in loads if x[0] in group] for group in split]
        return self._ws(lp, loads, fallback, lambda wait, release: seq(*head, overlapped_loop(
            lp.ko, lp.n, parts, wait, release, nacc, self.overlap_pingpong)), rings=rings)

    def _ws(self, lp, loads, fallback, consumer_of, rings=None):
        """Placed at the kernel's top level by `warp_specialize.place_warp_specialized`, which falls back to the
        unsplit TMA loop when the kernel's other statements do not allow the split.  `rings`: the
        loads split into groups, each on its own full/empty ring (consumer_of then gets
        wait(i, tile) and release(i, tile) of ring i); by default one ring for all."""
        S, ko, n = lp.stages, lp.ko, lp.n
        groups = rings or [loads]
        names = [""] if rings is None else [f"_{i}" for i in range(len(groups))]
        full = [Buffer(f"tma_full{x}", (S,), dt.uint64, "shared", span=lp.f.span) for x in names]
        empty = [Buffer(f"tma_empty{x}", (S,), dt.uint64, "shared", span=lp.f.span) for x in names]
        warps = self.threads // 32
        t = Var(f"{ko.name}_load")
        issue = []
        for i, group in enumerate(groups):
            wait_empty = _call(I.MbarWaitParity(), Ref(empty[i], (binary("%", t, S),)),
                               binary("%", binary("+", binary("//", t, S), 1), 2))
            issue += [If(binary(">=", t, S), wait_empty), self._tma_issue(lp, group, full[i], t)]
        producer = For(t, const(0), n, "serial", seq(*issue), span=lp.f.span)

        def wait(i, tile):
            return _call(I.MbarWaitParity(), Ref(full[i], (binary("%", tile, S),)),
                         binary("%", binary("//", tile, S), 2))

        def release(i, tile):  # this warp is done with `tile`'s stage of ring i
            return _call(I.MbarArriveWarp(), Ref(empty[i], (binary("%", tile, S),)))
        if rings is None:
            consumer = consumer_of(wait(0, ko), lambda tile: release(0, tile))
        else:
            consumer = consumer_of(wait, release)
        tid0 = binary("==", thread_index(), 0)
        inits = [_call(I.MbarInit(), Ref(f, (const(s),)), const(1)) for f in full for s in range(S)]
        inits += [_call(I.MbarInit(), Ref(e, (const(s),)), const(warps)) for e in empty for s in range(S)]
        invals = [_call(I.MbarInval(), Ref(b, (const(s),))) for b in (*full, *empty) for s in range(S)]
        head = [*[Alloc(b) for b in (*full, *empty)], If(tid0, seq(*inits)), Sync()]
        tail = [Sync(), If(tid0, seq(*invals))]
        # the loop's plan note is the last one: visit_For appends it before building the form
        return Split(head, producer, consumer, tail, fallback, self.threads, len(self.notes) - 1, lp.blocks)

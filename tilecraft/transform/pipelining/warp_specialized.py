"""The warp-specialized loop (`WarpSpecialized`, sm_90a): a producer warpgroup (one thread of an
extra warpgroup) issues the loop's TMA loads into a ring of full/empty mbarriers, the consumer
warpgroups run the body and release each stage when done with it.

The builder returns a `Split`: the producer, the consumer loop, the barriers' set-up and clean-up.
`place_warp_specialized` then rebuilds the kernel around it as one `WarpSpecialize` node: shared
allocations, barrier set-up and the Lets the producer may need come first (both roles see them);
the consumer role is everything else of the kernel, in order (plan_pipelines planned the split only
where the producer needs no value the kernel computes: `split_placeable`).  `register_budgets` picks
the setmaxnreg budgets of the two roles.

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

from ...ir import (Alloc, Buffer, For, If, Kernel, Let, Load, Ref, Region, Stmt, Store, Sync, Var,
                   WarpSpecialize, binary, collect, const, seq, substitute, dtype as dt)
from ...ir import intrinsics as I
from ...ir.expr import thread_index
from ...ir.hopper import BLOCK_SHARED_RESERVE, REGISTER_FILE, SHARED_PER_SM, WARP_GROUP
from ...ir.loop_plan import WarpSpecialized
from . import BUILDERS
from .overlap import overlap_parts, overlapped_loop
from .parts import call, drained, fed, flat, producers, tma_issue, tma_loads

TWO_BLOCK_STAGES = 4       # the shallowest ring measured at the unsplit loop's speed (module docstring)
TWO_BLOCK_ACCUM_REGS = 128  # the one accumulator size measured: 128x128 fp32 on one warpgroup


@dataclass(frozen=True, eq=False)
class Split(Stmt):
    """A warp-specialized loop waiting to be placed at its kernel's top level."""
    head: list
    producer: Stmt
    consumer: Stmt
    tail: list
    threads: int
    budgets: tuple   # (producer, consumer) setmaxnreg budgets, (0, 0) to keep the launch's
    blocks: int = 1   # blocks per SM the split is launched for (two_block_ring)


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


def split_placeable(kernel_body, loop) -> bool:
    """Whether the producer of a split `loop` would see every value it may need: the top-level Lets
    before the loop move ahead of the statements before them, so none may read on-chip memory, and no
    tile copy may be indexed by an on-chip scalar (a `T.alloc_var`)."""
    stmts = flat(kernel_body)
    i = next((j for j, s in enumerate(stmts) if s is loop), len(stmts))
    lets = [s for s in stmts[:i] if isinstance(s, Let)]
    if any(collect(s.value, lambda n: isinstance(n, Load) and n.buffer.scope != "global") for s in lets):
        return False
    # a tile indexed by a T.alloc_var (the group a grouped GEMM's block found before the loop): the
    # statements that computed it run in the consumer branch only, so the producer would read it unset
    return not any(collect(c.src, lambda n: isinstance(n, Load) and n.buffer.scope != "global")
                   for c in producers(loop))


def place_warp_specialized(k: Kernel) -> Kernel:
    """Split the kernel around its warp-specialized loop: shared allocations, the barriers' set-up
    and the Lets the producer needs come first (both roles see them), then the producer and, as
    the consumer, everything else in order."""
    stmts = flat(k.body)
    splits = [i for i, s in enumerate(stmts) if isinstance(s, Split)]
    if not splits:
        return k
    i = splits[0]
    sp = stmts[i]
    before, after = stmts[:i], stmts[i + 1:]
    shared = [s for s in before if isinstance(s, Alloc) and s.buffer.scope == "shared"]
    lets = [s for s in before if isinstance(s, Let)]
    rest = [s for s in before if s not in shared and s not in lets]
    producer_regs, consumer_regs = sp.budgets
    ws = WarpSpecialize(sp.producer, seq(*rest, sp.consumer, *after), sp.threads, producer_regs, consumer_regs,
                        sp.blocks)
    return replace(k, body=seq(*shared, *lets, *sp.head, ws, *sp.tail))


def _wgmma_consumer(lp, plan, ctx, loads):
    """A consumer warp releases tile ko-1's stage once its wgmmas retired."""
    g = lp.gemm(async_groups=1, tma_fed=True)
    # unrolled by the ring's depth, every stage index, barrier address and parity is a constant: the
    # two-block form with 5 or 6 stages ran 0.89x cuBLAS rolled, 0.95-0.96x unrolled (module docstring)
    return _split(lp, plan, ctx, loads, lambda wait_full, release: drained(
        ctx, lp, seq(wait_full, g, If(binary("<", const(0), lp.ko), release(binary("+", lp.ko, lp.stages - 1)))),
        g, unroll=lp.stages))


def _body_consumer(lp, plan, ctx, loads):
    """Any body: a consumer warp releases tile ko's stage after the body (whose gemms are
    synchronous), so consumer warpgroups no longer meet at a block barrier every iteration."""
    compute = fed(lp)
    return _split(lp, plan, ctx, loads, lambda wait_full, release: seq(
        call(I.FenceProxyAsyncShared()), Sync(), lp.loop(seq(wait_full, compute, release(lp.ko)))))


def _overlap_consumer(lp, plan, ctx, loads):
    """The consumer loop of pipelining/overlap.py: each iteration's softmax runs while the previous
    iteration's second gemm does; g1's and g2's tiles on rings of their own when the plan says."""
    parts = overlap_parts(fed(lp))
    nacc = lambda b: ctx.layouts[b].num_regs  # noqa: E731
    head = (call(I.FenceProxyAsyncShared()), Sync())
    if not plan.rings:
        return _split(lp, plan, ctx, loads, lambda wait_full, release: seq(*head, overlapped_loop(
            lp.ko, lp.n, parts, lambda i, t: substitute(wait_full, {lp.ko: t}) if i == 0 else None,
            lambda i, t: release(t) if i == 1 else None, nacc, plan.pingpong)))
    rings = [[loads[j] for j in group] for group in plan.rings]
    return _split(lp, plan, ctx, loads, lambda wait, release: seq(*head, overlapped_loop(
        lp.ko, lp.n, parts, wait, release, nacc, plan.pingpong)), rings=rings)


@BUILDERS.register(WarpSpecialized)
def build(lp, plan: WarpSpecialized, ctx):
    loads = tma_loads(ctx, lp, plan.tma.loads)
    consumer = _overlap_consumer if plan.overlap else _wgmma_consumer if plan.tma.wgmma else _body_consumer
    return consumer(lp, plan, ctx, loads)


def _split(lp, plan, ctx, loads, consumer_of, rings=None):
    """The Split (placed at the kernel's top level by `place_warp_specialized`).  `rings`: the loads
    split into groups, each on its own full/empty ring (consumer_of then gets wait(i, tile) and
    release(i, tile) of ring i); by default one ring for all."""
    S, ko, n = lp.stages, lp.ko, lp.n
    groups = rings or [loads]
    names = [""] if rings is None else [f"_{i}" for i in range(len(groups))]
    full = [Buffer(f"tma_full{x}", (S,), dt.uint64, "shared", span=lp.f.span) for x in names]
    empty = [Buffer(f"tma_empty{x}", (S,), dt.uint64, "shared", span=lp.f.span) for x in names]
    warps = ctx.threads // 32
    t = Var(f"{ko.name}_load")
    issue = []
    for i, group in enumerate(groups):
        wait_empty = call(I.MbarWaitParity(), Ref(empty[i], (binary("%", t, S),)),
                          binary("%", binary("+", binary("//", t, S), 1), 2))
        issue += [If(binary(">=", t, S), wait_empty), tma_issue(lp, group, full[i], t)]
    producer = For(t, const(0), n, "serial", seq(*issue), span=lp.f.span)

    def wait(i, tile):
        return call(I.MbarWaitParity(), Ref(full[i], (binary("%", tile, S),)),
                    binary("%", binary("//", tile, S), 2))

    def release(i, tile):  # this warp is done with `tile`'s stage of ring i
        return call(I.MbarArriveWarp(), Ref(empty[i], (binary("%", tile, S),)))
    if rings is None:
        consumer = consumer_of(wait(0, ko), lambda tile: release(0, tile))
    else:
        consumer = consumer_of(wait, release)
    tid0 = binary("==", thread_index(), 0)
    inits = [call(I.MbarInit(), Ref(f, (const(s),)), const(1)) for f in full for s in range(S)]
    inits += [call(I.MbarInit(), Ref(e, (const(s),)), const(warps)) for e in empty for s in range(S)]
    invals = [call(I.MbarInval(), Ref(b, (const(s),))) for b in (*full, *empty) for s in range(S)]
    head = [*[Alloc(b) for b in (*full, *empty)], If(tid0, seq(*inits)), Sync()]
    tail = [Sync(), If(tid0, seq(*invals))]
    budgets = plan.budgets if plan.set_max_nreg else (0, 0)   # T.disable_warp_group_reg_alloc(): as launched
    return Split(head, producer, consumer, tail, ctx.threads, budgets, plan.blocks)

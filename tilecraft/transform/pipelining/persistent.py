"""Persistent tiles (`Persistent`, sm_90a, `tc.persistent_tiles`): a GEMM kernel whose blocks walk the grid.

A classic GEMM launches one block per output tile.  Each block pays its pipeline fill: the first
k-tiles' TMA loads travel from L2/HBM while its warpgroups wait, and its epilogue runs while the
tensor cores idle.  When a tile's main loop is short (K = 2048: 32 k-tiles of 64) that fill is a
large share of the tile.  Here the kernel launches one block per SM, each walks tiles
block, block + P, block + 2P, ... (in T.use_swizzle's panel order when the program asks for it), and
its TMA ring runs across tiles: the loads of the next tile's first k-tiles are issued in this
tile's last iterations and land while this tile drains and runs its epilogue.

Before (after stage_epilogue, at pipeline_copies):
    with T.Kernel(gx, gy) as (bx, by):
        allocations; [T.use_swizzle]; clear; small copies (a bias tile)
        for ko in T.Pipelined(n, num_stages=S): TMA-able tile copies; one wgmma gemm
        epilogue
After:
    with T.Kernel(P) as (tile_block,):                  P = min(gx * gy, SMs)
        allocations (every buffer lives across tiles: the ring is written during the epilogue)
        thread 0: init full[0 .. S-1]; barrier
        thread 0: issue k-tiles 0 .. S-2 of the block's first tile       (counts 0 .. S-2)
        for tile_it in range(ceil(gx * gy / P)):
            if tile_block + tile_it * P < gx * gy:     (only when P does not divide the tiles)
                bx, by = the tile's coordinates; clear; small copies
                for ko in range(n):                     count g = tile_it * n + ko
                    wait full[g % S] (parity (g / S) % 2); wgmmas on stage g % S; barrier
                    thread 0: issue count g + S - 1: k-tile ko + S - 1 of this tile, or
                              k-tile ko + S - 1 - n of the block's next tile when it has one
                drain; epilogue
        barrier; thread 0: invalidate full[]; barrier

When it is taken (transform/plan_pipelines.py): "auto" (the sm_90a default) where it measured faster
on the H200 (128x256x64/3/256, against cuBLAS, rounds interleaved;
benchmarks/results/2026-12-01_h200_s9_persistent.md): GEMM 4096x4096x2048 (32 k-tiles, 3.9 waves)
0.889 -> 1.000x, 8192x8192x2048 (32 k-tiles) 0.928 -> 0.997x, 4096^3 (64 k-tiles) 0.979 -> 0.995x,
GEMM + bias + GELU 8192x8192x2048 1.086 -> 1.113x addmm + gelu; at 8192^3 (128 k-tiles) 1.014 ->
1.001x, no gain.  So: at most AUTO_MAX_K_TILES k-tiles, at least AUTO_MIN_WAVES waves, and a block
that has its SM to itself anyway (its ring alone takes more than half the SM's shared memory: a
walk of one block per SM would otherwise give up the second block that hides latency).  True takes
it wherever it is legal.
"""
from __future__ import annotations

from dataclasses import replace

from ...ir import Alloc, Annotate, Buffer, For, If, Kernel, Let, Ref, Sync, binary, const, seq, dtype as dt
from ...ir import intrinsics as I
from ...ir.stmt import AnnotationKey
from ...ir.expr import thread_index
from ...ir.loop_plan import Persistent, TileWalk
from . import BUILDERS
from .parts import call, drained, flat, tma_issue, tma_loads

AUTO_MAX_K_TILES = 64
AUTO_MIN_WAVES = 2


def tile_coords(t, gx: int, gy: int, panel: int | None) -> tuple:
    """(bx, by) of tile number `t`: launch order (bx fastest), or T.use_swizzle's panels of `panel`
    block-rows walked column by column (as codegen rasterizes a launched grid).  Clamped into the
    grid, which changes no value in range and lets the bounds analysis see the range."""
    def clamp(e, hi):
        return binary("max", binary("min", e, hi - 1), 0)
    if not panel:
        return clamp(binary("%", t, gx), gx), clamp(binary("//", t, gx), gy)
    per = panel * gx
    p = binary("//", t, per)
    rows = binary("min", panel, binary("-", gy, binary("*", p, panel)))
    inside = binary("-", t, binary("*", p, per))
    return (clamp(binary("//", inside, rows), gx),
            clamp(binary("+", binary("*", p, panel), binary("%", inside, rows)), gy))


def walk_kernel(k: Kernel, walk: TileWalk, loop: For) -> Kernel:
    """`k` as one block per SM walking its tiles (the loop's builder fills in the ring's set-up)."""
    top = flat(k.body)
    allocs = [s for s in top if isinstance(s, Alloc) and s.init is None]
    rest = [s for s in top if s not in allocs and not (isinstance(s, Annotate) and s.key == AnnotationKey.USE_SWIZZLE)]
    body = seq(*[Let(v, e) for v, e in walk.coords], *rest)
    if walk.tiles % walk.blocks:
        body = If(walk.has_tile(walk.it), body)
    waves = -(-walk.tiles // walk.blocks)
    it_loop = For(walk.it, const(0), const(waves), "serial", body, span=loop.span)
    return replace(k, grid=(const(walk.blocks),), block_vars=(walk.block,), body=seq(*allocs, it_loop))


def placed_walk(k: Kernel, walk: TileWalk, before: list, after: list) -> Kernel:
    """The visited kernel with the ring's set-up before the walk and its clean-up after."""
    top = flat(k.body)
    i = next(j for j, s in enumerate(top) if isinstance(s, For) and s.var is walk.it)
    return replace(k, body=seq(*top[:i], *before, top[i], *after, *top[i + 1:]))


@BUILDERS.register(Persistent)
def build(lp, plan: Persistent, ctx):
    """The walk's TMA + wgmma loop (module docstring): the ring counts across tiles."""
    walk, S, ko, n = plan.walk, lp.stages, lp.ko, plan.walk.n
    loads = tma_loads(ctx, lp, plan.tma.loads)
    bar = Buffer("tma_bar", (S,), dt.uint64, "shared", span=lp.f.span)
    tid0 = binary("==", thread_index(), 0)
    g = walk.count(ko)
    wait = call(I.MbarWaitParity(), Ref(bar, (binary("%", g, S),)), binary("%", binary("//", g, S), 2))
    gemm = lp.gemm(async_groups=1, tma_fed=True)
    nxt, after = binary("+", ko, S - 1), binary("+", g, S - 1)
    following = binary("+", walk.it, 1)
    refill = If(binary("<", nxt, n), If(tid0, tma_issue(lp, loads, bar, after, {ko: nxt})),
                If(walk.has_tile(following), If(tid0, tma_issue(
                    lp, loads, bar, after, {ko: binary("-", nxt, n), **walk.coords_at(following)}))))
    bars = [Ref(bar, (const(s),)) for s in range(S)]
    first = walk.coords_at(const(0))
    ctx.walk_before = [Alloc(bar), If(tid0, seq(*[call(I.MbarInit(), r, const(1)) for r in bars])), Sync(),
                       *[If(tid0, tma_issue(lp, loads, bar, const(s), {ko: const(s), **first}))
                         for s in range(S - 1)]]
    ctx.walk_after = [Sync(), If(tid0, seq(*[call(I.MbarInval(), r) for r in bars])), Sync()]
    return drained(ctx, lp, seq(wait, gemm, Sync(), refill), gemm)

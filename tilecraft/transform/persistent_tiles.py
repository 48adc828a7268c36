"""Persistent tiles: a GEMM kernel whose blocks walk the grid (sm_90a; a form of pipeline_copies, kept
apart for size; option `tc.persistent_tiles`).

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

"auto" (the sm_90a default) takes it where it measured faster on the H200 (128x256x64/3/256, against
cuBLAS, rounds interleaved; benchmarks/results/2026-12-01_h200_s9_persistent.md): GEMM 4096x4096x2048
(32 k-tiles, 3.9 waves) 0.889 -> 1.000x, 8192x8192x2048 (32 k-tiles) 0.928 -> 0.997x, 4096^3 (64 k-tiles)
0.979 -> 0.995x, GEMM + bias + GELU 8192x8192x2048 1.086 -> 1.113x addmm + gelu; at 8192^3 (128
k-tiles) 1.014 -> 1.001x, no gain.  So: at most AUTO_MAX_K_TILES k-tiles, at least AUTO_MIN_WAVES
waves, and a block that has its SM to itself anyway (its ring alone takes more than half the SM's
shared memory: a walk of one block per SM would otherwise give up the second block that hides
latency).  True takes it wherever it is legal.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..ir import (Alloc, Annotate, Buffer, For, Gemm, If, Kernel, Let, Load, Ref, Region, Store, Sync, Var, binary,
                  collect, const, seq, substitute, dtype as dt)
from ..ir import intrinsics as I
from ..ir.expr import Const, thread_index
from ..ir.lowering import WgmmaPlan

_call = I.evaluate
AUTO_MAX_K_TILES = 64
AUTO_MIN_WAVES = 2


@dataclass(eq=False)
class TileWalk:
    """The walk of one persistent kernel: its loop variable, block index, P blocks over `tiles`
    tiles, the tile coordinates (bx / by as expressions of `it`), the pipelined loop (n k-tiles),
    and what the loop's form puts before and after the walk."""
    it: Var
    block: Var
    blocks: int
    tiles: int
    coords: dict
    loop: For
    n: int
    before: list = field(default_factory=list)
    after: list = field(default_factory=list)

    def tile(self, it) -> object:
        return binary("+", self.block, binary("*", it, self.blocks))

    def count(self, ko) -> object:
        """The ring's running count at k-tile `ko` of this iteration's tile."""
        return binary("+", binary("*", self.it, self.n), ko)

    def has_tile(self, it) -> object:
        return binary("<", self.tile(it), self.tiles)

    def coords_at(self, it) -> dict:
        return {v: substitute(e, {self.it: it}) for v, e in self.coords.items()}

    def note(self) -> str:
        return (f", persistent: {self.blocks} blocks walk the {self.tiles} tiles, the next tile's first "
                f"k-tiles loading during this tile's epilogue (tc.persistent_tiles)")


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


class PersistentForms:
    """pipeline_copies' persistent form (mixed into its _Pipeline, which supplies `_tma_loads`,
    `_tma_issue`, `_drained`, `_tma_plan`, `_form`, `use_tma`, `wgmma_async`, `warp_specialize`,
    `persistent`, `smem_limit`, `num_sms`)."""

    def _plan_walk(self, k: Kernel, producers_of, symbols) -> TileWalk | None:
        """The walk for kernel `k`, or None when it does not qualify (module docstring)."""
        if self.persistent is False or not (self.use_tma and self.wgmma_async) or self.warp_specialize is True:
            return None
        if symbols or len(k.grid) != 2 or not all(isinstance(g, Const) for g in k.grid) or \
                any(t != 1 for t in k.threads[1:]):
            return None
        loops = collect(k.body, lambda n: isinstance(n, For) and n.kind == "pipelined")
        top = _top(k.body)
        if len(loops) != 1 or loops[0] not in top:
            return None
        f = loops[0]
        S = f.annotation("num_stages", 0)
        if not (isinstance(f.extent, Const) and isinstance(f.start, Const) and f.start.value == 0 and f.step == 1
                and 2 <= S <= int(f.extent.value)):
            return None
        producers = producers_of(f)
        rest = [s for s in _top(f.body) if s not in producers]
        if not producers or len(rest) != 1 or not isinstance(rest[0], Gemm) or \
                not isinstance(rest[0].plan, WgmmaPlan) or self._form(rest, producers) != "wgmma_tma":
            return None
        tiles_of_loop = {c.dst.buffer for c in producers}
        if any(n.buffer in tiles_of_loop for s in top if s is not f
               for n in collect(s, lambda n: isinstance(n, (Load, Store, Ref, Region)))):
            return None   # the next tile's loads land in the ring while this tile's epilogue runs
        bx, by = k.block_vars
        allowed = {f.var, bx, by}
        if any(not set(collect(c.src, lambda n: isinstance(n, Var))) <= allowed for c in producers):
            return None   # a k-tile's source must follow from (ko, bx, by) alone: the next tile's is issued early
        gx, gy = int(k.grid[0].value), int(k.grid[1].value)
        tiles, n = gx * gy, int(f.extent.value)
        ring = S * sum(c.dst.buffer.nbytes for c in producers)
        smem = self.kernel_smem + (S - 1) * sum(c.dst.buffer.nbytes for c in producers) + 1024 * (len(top) + S)
        if smem > self.smem_limit or tiles <= self.num_sms:
            return None
        if self.persistent == "auto" and (n > AUTO_MAX_K_TILES or tiles < AUTO_MIN_WAVES * self.num_sms
                                          or ring <= self.smem_limit // 2):
            return None
        swz = [s for s in top if isinstance(s, Annotate) and s.key == "use_swizzle"]
        it, block = Var("tile_it"), Var("tile_block")
        blocks = min(tiles, self.num_sms)
        walk = TileWalk(it, block, blocks, tiles, {}, f, n)
        cx, cy = tile_coords(walk.tile(it), gx, gy, swz[0].value[0] if swz else None)
        walk.coords = {bx: cx, by: cy}
        return walk

    def _walk_kernel(self, k: Kernel, walk: TileWalk) -> Kernel:
        """`k` as one block per SM walking its tiles (the loop's form fills in the ring's set-up)."""
        top = _top(k.body)
        allocs = [s for s in top if isinstance(s, Alloc) and s.init is None]
        rest = [s for s in top if s not in allocs and not (isinstance(s, Annotate) and s.key == "use_swizzle")]
        body = seq(*[Let(v, e) for v, e in walk.coords.items()], *rest)
        if walk.tiles % walk.blocks:
            body = If(walk.has_tile(walk.it), body)
        waves = -(-walk.tiles // walk.blocks)
        loop = For(walk.it, const(0), const(waves), "serial", body, span=walk.loop.span)
        return replace(k, grid=(const(walk.blocks),), block_vars=(walk.block,), body=seq(*allocs, loop))

    def _placed_walk(self, k: Kernel, walk: TileWalk) -> Kernel:
        """The visited kernel with the ring's set-up before the walk and its clean-up after."""
        top = _top(k.body)
        i = next(j for j, s in enumerate(top) if isinstance(s, For) and s.var is walk.it)
        return replace(k, body=seq(*top[:i], *walk.before, top[i], *walk.after, *top[i + 1:]))

    def _persistent_tma(self, lp):
        """The walk's TMA + wgmma loop (module docstring): the ring counts across tiles."""
        walk, S, ko, n = self.walk, lp.stages, lp.ko, self.walk.n
        loads = self._tma_loads(lp)
        bar = Buffer("tma_bar", (S,), dt.uint64, "shared", span=lp.f.span)
        tid0 = binary("==", thread_index(), 0)
        g = walk.count(ko)
        wait = _call(I.MbarWaitParity(), Ref(bar, (binary("%", g, S),)), binary("%", binary("//", g, S), 2))
        gemm = lp.gemm(async_groups=1, tma_fed=True)
        nxt, after = binary("+", ko, S - 1), binary("+", g, S - 1)
        following = binary("+", walk.it, 1)
        refill = If(binary("<", nxt, n), If(tid0, self._tma_issue(lp, loads, bar, after, {ko: nxt})),
                    If(walk.has_tile(following), If(tid0, self._tma_issue(
                        lp, loads, bar, after, {ko: binary("-", nxt, n), **walk.coords_at(following)}))))
        bars = [Ref(bar, (const(s),)) for s in range(S)]
        first = walk.coords_at(const(0))
        walk.before = [Alloc(bar), If(tid0, seq(*[_call(I.MbarInit(), r, const(1)) for r in bars])), Sync(),
                       *[If(tid0, self._tma_issue(lp, loads, bar, const(s), {ko: const(s), **first}))
                         for s in range(S - 1)]]
        walk.after = [Sync(), If(tid0, seq(*[_call(I.MbarInval(), r) for r in bars])), Sync()]
        return self._drained(lp, seq(wait, gemm, Sync(), refill), gemm)


def _top(body) -> list:
    from .warp_specialize import flat
    return flat(body)

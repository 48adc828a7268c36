"""Place the waits of deferred bulk reduces (CUDA, sm_90+).

Before: `T.atomic_add` of a shared tile into global memory lowered to its TMA bulk reduce-adds
(cuda_ops/misc.py::_bulk_reduce) closed by a `BulkCommit(tile)` and no wait: the TMA unit may still
be reading the tile's rows from shared memory.  After: a `BulkWaitRead(tile)` and a block barrier
before every statement that writes the tile again (the issuing threads wait for their reads, the
barrier holds the writers back until then), and a `BulkWaitRead` right after the outermost loop that
issued the reduces (or right after a commit outside any loop): from there on the tile's bytes are free
for later buffers (plan_shared_memory) and the block may exit.  In FlashAttention's backward the dQ
tile is rewritten one loop iteration later, so its rows could travel to L2 while the next iteration's
gemms run; measured on the H200 this gained nothing over waiting at once (the adds' own throughput is
the cost: benchmarks/results/2026-12-03_h200_s17_attention_bwd.md), and it costs nothing either.

The wait goes before the outermost statement that writes the tile without issuing its reduce (a
whole lowered copy loop, not each store).  A statement that both writes the tile and issues its
reduce (the loop body holding both) is entered instead; inside it the write precedes the reduce in
program order, and in the next iteration it follows the previous one's commit.  A redundant wait
(before the first reduce) returns at once.  Kernels with warp-group branches keep the immediate
wait (the lowering does not defer there).
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Kernel, Mutator, Ref, Seq, Store, Sync, collect, const, seq
from ..ir import intrinsics as I
from ..ir.func import PrimFunc
from ..ir.intrinsics import ATOMIC, PTR, READ_WRITE, WRITE, IntrinsicCall

_WRITES = (WRITE, READ_WRITE, ATOMIC)


def _sources(node) -> set:
    return {c.args[0].buffer for c in collect(node, lambda n: isinstance(n, IntrinsicCall)
                                              and isinstance(n.intrinsic, I.BulkCommit))}


def _writes(node, tiles: set) -> set:
    """The tiles of `tiles` that `node` writes (stores, or intrinsics writing through a pointer)."""
    out = {s.buffer for s in collect(node, lambda n: isinstance(n, Store) and n.buffer in tiles)}
    for c in collect(node, lambda n: isinstance(n, IntrinsicCall)):
        for decl, a in c.operand_args():
            if decl is not None and decl.kind == PTR and decl.access in _WRITES and isinstance(a, Ref) \
                    and a.buffer in tiles:
                out.add(a.buffer)
    return out


def _wait(tile):
    return I.evaluate(I.BulkWaitRead(), Ref(tile, tuple(const(0) for _ in tile.shape)))


class _Place(Mutator):
    def __init__(self, tiles: set):
        super().__init__()
        self.tiles = tiles
        self.loops = 0   # loops entered

    def _loop(self, node):
        self.loops += 1
        try:
            return Mutator.generic(self, node)
        finally:
            self.loops -= 1

    visit_For = _loop
    visit_While = _loop

    def visit_Seq(self, s):
        out = []
        for child in s.stmts:
            written = _writes(child, self.tiles)
            if written and not (_sources(child) & written):
                out.extend(_wait(t) for t in _ordered(written))
                out.append(Sync())
                out.append(child)
                continue
            out.append(self.visit(child))
            issued = _sources(child)
            if issued and self.loops == 0:
                # the outermost loop holding the commit (or the commit itself, outside any loop) is done:
                # wait here, so the tile's bytes are free for what comes after (plan_shared_memory may give
                # them to a later buffer: insert_syncs puts the barrier before its first write)
                out.extend(_wait(t) for t in _ordered(issued))
        return seq(*out)


def _ordered(tiles):
    return sorted(tiles, key=lambda b: b.name)


def place_bulk_waits(func: PrimFunc, ctx) -> PrimFunc:
    kernels = collect(func.body, lambda n: isinstance(n, Kernel))
    if not any(_sources(k) for k in kernels):
        return func

    class _Kernels(Mutator):
        def visit_Kernel(self, k: Kernel):
            tiles = _sources(k)
            if not tiles:
                return k
            body = k.body if isinstance(k.body, Seq) else Seq((k.body,))
            return replace(k, body=_Place(tiles).visit(body))

    return func.with_body(_Kernels().visit(func.body))

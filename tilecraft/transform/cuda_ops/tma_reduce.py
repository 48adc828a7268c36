"""`T.atomic_add(G[...], S)` of a shared tile by TMA tensor reduces (sm_90+): which tiles are laid out
for it, their tensor maps, and the instructions.

FlashAttention's backward adds its dQ so: a gemm accumulator copied into a shared fp32 tile, the tile
added into the global dQ.  A plain row-major tile with rows a multiple of 128 bytes apart makes the
copy an 8-way bank conflict (the accumulator layout: a warp's store touches 8 rows at once; ncu on the
H200: 102 M of 157 M shared-store wavefronts were conflicts).  Such a tile is laid out instead in the
128-byte swizzle the wgmma operand tiles use (column panels of 128-byte rows, 16-byte chunks permuted by
row: the same store takes the fewest wavefronts, tests/cuda/test_bulk_reduce_compile.py) and added by
one `cp.reduce.async.bulk.tensor` per panel through a tensor map of G, which un-swizzles it; rows past
G's end are not added (a ragged last tile needs no guard).  Padding the rows instead (one bulk reduce
per row) measured 7 % slower on the H200: 64 small reduces, misaligned rows, more L2 requests.

- `staging_tiles(func)`: the tiles plan_shared_layouts lays out so (only where nothing else sees them);
- `tma_reduces(func)`: per (tensor, tile) pair the tensor map, its boxes and row dimension (lower_cuda
  adds the maps after the pipelines' own);
- `tma_reduce_issue(op, ctx)`: one thread's reduces for a T.atomic_add, or None (cuda_ops/misc.py then
  takes the bulk reduce by rows, or element atomics).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from ...ir import Alloc, Annotate, AtomicAdd, Buffer, Copy, Gemm, If, Node, Ref, Region, binary, collect, const, seq
from ...ir import intrinsics as I
from ...ir.expr import BuiltinVar
from ...ir.layout.tma import sm90_tile_boxes, tma_tensor_ok
from ...ir.lowering import SWIZZLE_SM90, TmaDescriptor


def bulk_reduce_enabled(ctx) -> bool:
    """Shared tiles added into global memory go through the TMA unit (misc._bulk_reduce)."""
    return ctx.target.has("tma") and ctx.options.bulk_reduce and not ctx.options.disable_tma_lower


@dataclass(frozen=True)
class TmaReduce:
    desc: BuiltinVar     # the kernel's pointer to the tensor map (codegen: tc_tma_<index>)
    boxes: tuple         # (smem element offset, row0, col0, rows, cols) per box: sm90_tile_boxes
    row_dim: int         # the tensor dim the tile's rows run along


def _row_dim(op: AtomicAdd, params) -> int | None:
    """The dimension of op's destination its tile's rows run along, when a tensor map of that tensor can
    take the whole 2-D tile in the 128-byte-swizzle layout (and the tile is one), else None."""
    v, d = op.value, op.dst
    if (op.kind != "add" or not isinstance(v, Region) or v.buffer.scope != "shared" or v.buffer.ndim != 2
            or d.buffer.scope != "global" or not any(p is d.buffer for p in params) or not v.covers_whole()
            or not tma_tensor_ok(d.buffer, v.buffer, True)):
        return None
    ext = [int(e.value) if hasattr(e, "value") else e for e in d.extents]
    outer = [i for i in range(d.buffer.ndim - 1) if ext[i] != 1]
    if len(outer) != 1 or (ext[outer[0]], ext[-1]) != tuple(v.buffer.shape):
        return None
    return outer[0]


def _mentions(node, buf: Buffer) -> bool:
    for f in fields(node):
        v = getattr(node, f.name)
        if v is buf or (isinstance(v, (tuple, list)) and any(x is buf for x in v)) \
                or (isinstance(v, dict) and any(k is buf or x is buf for k, x in v.items())):
            return True
    return False


def staging_tiles(func, ctx) -> set:
    """Shared tiles whose every use is `T.copy(accumulator, tile)` or a T.atomic_add of the whole tile
    that `_row_dim` accepts: no gemm, load, view or layout annotation sees their layout."""
    if func.body is None or not ctx.options.tma_reduce or not bulk_reduce_enabled(ctx):
        return set()
    adds = [n for n in collect(func.body, lambda n: isinstance(n, AtomicAdd))
            if _row_dim(n, func.params) is not None]
    if not adds:
        return set()
    accumulators = {g.c.buffer for g in collect(func.body, lambda n: isinstance(n, Gemm))}
    out = set()
    for tile in {a.value.buffer for a in adds}:
        allowed = {id(a.value) for a in adds if a.value.buffer is tile}
        for n in collect(func.body, lambda n: isinstance(n, (Copy, Alloc))):
            if isinstance(n, Alloc) and n.buffer is tile and n.init is None:
                allowed.add(id(n))
            elif isinstance(n, Copy) and n.dst.buffer is tile and n.src.buffer in accumulators:
                allowed.add(id(n.dst))
        refs = collect(func.body, lambda n: not isinstance(n, Buffer) and isinstance(n, Node) and _mentions(n, tile))
        if not any(isinstance(n, Annotate) for n in refs) and all(id(n) in allowed for n in refs):
            out.add(tile)
    return out


def tma_reduces(func, first_desc: int) -> tuple[dict, tuple]:
    """{(tensor, tile): TmaReduce} for the T.atomic_adds of 128-byte-swizzled tiles a tensor map can take,
    and the TmaDescriptors to append to the kernel's (their indices from `first_desc` on)."""
    plans, descs = {}, []
    layouts = func.lowering.smem_layouts
    index = {id(p): i for i, p in enumerate(func.params)}
    for op in collect(func.body, lambda n: isinstance(n, AtomicAdd)):
        row_dim = _row_dim(op, func.params)
        if row_dim is None or layouts.get(op.value.buffer) != SWIZZLE_SM90:
            continue
        key = (op.dst.buffer, op.value.buffer)
        if key in plans:
            continue
        tile, tensor = op.value.buffer, op.dst.buffer
        swizzle, boxes = sm90_tile_boxes(tile.shape[0], tile.shape[1], tile.dtype.bytes)
        box = [1] * tensor.ndim
        box[row_dim], box[-1] = boxes[0][3], boxes[0][4]
        plans[key] = TmaReduce(BuiltinVar(f"tc_tma_{first_desc + len(descs)}"), tuple(boxes), row_dim)
        descs.append(TmaDescriptor(index[id(tensor)], tuple(box), swizzle, tensor.name, reduce=True))
    return plans, tuple(descs)


def tma_reduce_issue(op: AtomicAdd, ctx):
    """One thread's tensor reduces of op's tile, a box each, or None where op has no TmaReduce."""
    plan = ctx.tma_reduces.get((op.dst.buffer, op.value.buffer)) if isinstance(op.value, Region) else None
    if plan is None:
        return None
    tile = op.value.buffer
    base = Ref(tile, tuple(const(0) for _ in tile.shape))
    calls = []
    for off, r0, c0, _, _ in plan.boxes:
        at = list(op.dst.starts)
        at[plan.row_dim], at[-1] = binary("+", at[plan.row_dim], r0), binary("+", at[-1], c0)
        calls.append(I.evaluate(I.TmaReduceAddTile(), base, const(off), plan.desc, *reversed(at), span=op.span))
    return If(binary("==", ctx.tid, 0), seq(*calls))

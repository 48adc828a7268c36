"""Pad the rows of shared tiles that only stage a fragment for a bulk reduce into global memory
(sm_90+ CUDA targets with `tc.bulk_reduce`).

Before: FlashAttention backward's dQ path

    dq_shared = shared (64, 128) fp32          # rows of 512 bytes: every row starts at bank 0
    T.copy(dq, dq_shared)                       # wgmma accumulator: a warp writes 8 rows x 32 bytes
    T.atomic_add(dQ[...], dq_shared)            # one TMA bulk reduce-add (cuda_ops/misc.py)

In the tensor cores' accumulator layout a warp's store touches 8 rows at once; with rows a multiple
of 128 bytes apart all 8 land on the same 8 banks: an 8-way conflict, four times the wavefronts of a
conflict-free store (ncu on the H200: MIO throttle, short scoreboard).  After:

    dq_shared = shared (64, 128 + 4) fp32      # 16 bytes of padding: the 8 rows start 4 banks apart
    T.copy(dq, dq_shared[:, :128])
    T.atomic_add(dQ[...], dq_shared[:, :128])  # one bulk reduce-add per row (rows no longer one run)

Only a tile whose every use is one of those two statements, copied from a gemm's accumulator, is
padded (no gemm, load, view or layout annotation sees it), so nothing else can observe the layout;
the sums are the same.  Runs before
anything plans shared layouts or places shared memory.  `pass_configs={"tc.pad_reduce_tiles": False}`
turns it off.
"""
from __future__ import annotations

from dataclasses import fields, replace

from ..ir import Alloc, Annotate, AtomicAdd, Buffer, Copy, Gemm, Mutator, Node, collect
from ..ir.func import PrimFunc

PAD_BYTES = 16   # 4 banks between consecutive rows: 8 rows of a warp's store cover the 32 banks twice
BANK_PERIOD = 128


def bulk_reduce_enabled(ctx) -> bool:
    """Shared tiles added into global memory go through the TMA unit (cuda_ops/misc.py::_bulk_reduce)."""
    return ctx.target.has("tma") and ctx.options.bulk_reduce and not ctx.options.disable_tma_lower


def _mentions(node, buf: Buffer) -> bool:
    for f in fields(node):
        v = getattr(node, f.name)
        if v is buf:
            return True
        if isinstance(v, (tuple, list)) and any(x is buf for x in v):
            return True
        if isinstance(v, dict) and any(k is buf or x is buf for k, x in v.items()):
            return True
    return False


def _candidate(buf: Buffer) -> bool:
    if buf.scope != "shared" or buf.ndim < 2 or buf.dtype.packed:
        return False
    if not all(isinstance(n, int) for n in buf.shape):
        return False
    return buf.shape[-1] * buf.dtype.bytes % BANK_PERIOD == 0 and PAD_BYTES % buf.dtype.bytes == 0


def _only_staged_for_reduce(body, buf: Buffer, accumulators: set) -> bool:
    allowed: set = set()
    for n in collect(body, lambda n: isinstance(n, (Copy, AtomicAdd, Alloc))):
        if isinstance(n, Alloc) and n.buffer is buf and n.init is None:
            allowed.add(id(n))
        elif isinstance(n, Copy) and n.dst.buffer is buf and n.src.buffer in accumulators:
            allowed.add(id(n.dst))
        elif (isinstance(n, AtomicAdd) and n.kind == "add" and hasattr(n.value, "buffer")
              and n.value.buffer is buf and n.dst.buffer.scope == "global"):
            allowed.add(id(n.value))
    refs = collect(body, lambda n: not isinstance(n, Buffer) and isinstance(n, Node) and _mentions(n, buf))
    if any(isinstance(n, Annotate) for n in refs):
        return False
    return len(refs) >= 3 and all(id(n) in allowed for n in refs)


def pad_reduce_tiles(func: PrimFunc, ctx) -> PrimFunc:
    if func.body is None or not ctx.options.pad_reduce_tiles or not bulk_reduce_enabled(ctx):
        return func
    # the tensor cores' accumulator layout is the one whose stores conflict (a thread's two adjacent
    # columns of 8 rows); other fragment layouts keep a row inside a warp and store without conflicts
    accumulators = {g.c.buffer for g in collect(func.body, lambda n: isinstance(n, Gemm))}
    padded = {}
    for a in collect(func.body, lambda n: isinstance(n, Alloc)):
        b = a.buffer
        if _candidate(b) and b not in padded and _only_staged_for_reduce(func.body, b, accumulators):
            shape = tuple(b.shape[:-1]) + (b.shape[-1] + PAD_BYTES // b.dtype.bytes,)
            padded[b] = replace(b, shape=shape)
    if not padded:
        return func
    # regions keep their extents: every use now covers the first shape[-1] columns of each row
    return func.with_body(Mutator(buffer_map=padded).visit(func.body))

"""Place every shared buffer in the block's dynamic shared memory (CUDA targets).

Before: `Alloc`s of shared buffers anywhere in the kernel.  After: the lowering state's
`smem_offsets` maps each shared buffer (and each T.view of one, at its base's offset) to its byte offset (128-byte aligned, which TMA and
16-byte vector accesses need; 1024 for wgmma tiles) and `smem_bytes` is the total.

Buffers whose lifetimes do not overlap share memory.  A lifetime is the span of top-level kernel
statements that touch the buffer (a loop counts as one statement, so everything a loop body uses
stays live for the whole loop).  Placement is first-fit by start of life.  `insert_syncs` runs
after this pass and compares address ranges, not names, so a buffer reusing another's bytes is
separated from the old one's last readers by a barrier.

A kernel that needs more than the architecture allows per block is rejected here with every
buffer, its size and the total listed.
"""
from __future__ import annotations

from ..errors import TilecraftError
from ..ir import Alloc, Kernel, Load, Ref, Seq, Store, View, WarpSpecialize, collect, seq
from ..ir.func import PrimFunc
from ..ir.lowering import SWIZZLE_SM90

ALIGN = 128


def _top_level(body) -> list:
    """The kernel's top-level statements; a warp-specialized block counts as its producer (which
    runs alongside the consumer's first statements) followed by the consumer's statements."""
    out = []
    for s in (body.stmts if isinstance(body, Seq) else (body,)):
        if not isinstance(s, WarpSpecialize):
            out.append(s)
            continue
        consumer = _top_level(s.consumer)
        # the producer's buffers live from the split to the last consumer statement using them
        theirs = {n.buffer for n in collect(s.producer, lambda n: isinstance(n, (Load, Store, Ref)))}
        last = max((i for i, c in enumerate(consumer)
                    if any(n.buffer in theirs for n in collect(c, lambda n: isinstance(n, (Load, Store, Ref))))),
                   default=0)
        consumer[0] = seq(s.producer, consumer[0])
        consumer[last] = seq(s.producer, consumer[last])
        out.extend(consumer)
    return out


def _lifetimes(k: Kernel, bufs) -> dict:
    stmts = _top_level(k.body)
    life = {}
    for pos, s in enumerate(stmts):
        touched = {n.buffer for n in collect(s, lambda n: isinstance(n, (Load, Store, Ref)))}
        for b in bufs:
            if b in touched:
                lo, hi = life.get(b, (pos, pos))
                life[b] = (min(lo, pos), max(hi, pos))
    for b in bufs:
        life.setdefault(b, (0, len(stmts)))
    return life


def _shared_views(k: Kernel, bufs) -> dict:
    """view -> base for the T.view statements of shared tiles in kernel `k` (language/views.py):
    a view has no memory of its own, it is placed at its base's offset."""
    views = {}
    for v in collect(k.body, lambda n: isinstance(n, View)):
        if v.buffer.scope != "shared":
            continue
        if v.base not in bufs:
            raise TilecraftError(
                f"T.view {v.buffer.name}: its base shared tile {v.base.name} was rewritten by an earlier "
                f"pass (a T.Pipelined loop multi-buffers the tiles it copies into), so the view has no "
                f"fixed bytes to alias", v.span, hint="view a tile that no pipelined copy writes, or use num_stages=0")
        views[v.buffer] = v.base
    return views


def _place(bufs, life, align=ALIGN) -> tuple[dict, int]:
    """`align`: one alignment for every buffer, or a function giving each buffer's."""
    align_of = align if callable(align) else (lambda b: align)
    placed = []  # (offset, end offset, first, last)
    offsets, top = {}, 0
    for b in sorted(bufs, key=lambda b: (life[b][0], -b.nbytes)):
        lo, hi = life[b]
        busy = sorted((o, e) for o, e, f, l in placed if not (l < lo or f > hi))
        off, a = 0, align_of(b)
        for o, e in busy:
            if off + b.nbytes <= o:
                break
            off = max(off, -(-e // a) * a)
        offsets[b] = off
        placed.append((off, off + b.nbytes, lo, hi))
        top = max(top, off + b.nbytes)
    return offsets, top


def plan_shared_memory(func: PrimFunc, target) -> PrimFunc:
    offsets, total = {}, 0
    for k in collect(func.body, lambda n: isinstance(n, Kernel)):
        bufs = []
        for a in collect(k.body, lambda n: isinstance(n, Alloc)):
            if a.buffer.scope == "shared" and a.buffer not in bufs:
                bufs.append(a.buffer)
        # wgmma reads its operands through descriptors that assume 1024-byte aligned swizzle panels.
        # Every buffer of such a kernel is placed on 1024 bytes (the layout the Hopper kernels were
        # measured and checked with); only when that does not fit do the other buffers (row vectors,
        # mbarriers) keep 128 and fill the gaps between the tiles.
        layouts = func.lowering.smem_layouts
        views = _shared_views(k, bufs)
        life = _lifetimes(k, bufs + list(views))
        for v, base in views.items():  # a base lives as long as anything reaches it through a view
            life[base] = (min(life[base][0], life[v][0]), max(life[base][1], life[v][1]))
        hopper = any(layouts.get(b) == SWIZZLE_SM90 for b in bufs)
        offs, size = _place(bufs, life, 1024 if hopper else ALIGN)
        limit = target.max_shared_memory
        if hopper and size > limit:
            offs, size = _place(bufs, life, lambda b: 1024 if layouts.get(b) == SWIZZLE_SM90 else ALIGN)
        offs.update({v: offs[base] for v, base in views.items()})
        offsets.update(offs)
        total = max(total, size)
        if size > limit:
            listing = ", ".join(f"{b.name} {tuple(b.shape)} {b.dtype} = {b.nbytes} B" for b in bufs)
            raise TilecraftError(
                f"the kernel needs {size} bytes of shared memory per block but {target.arch} allows at most "
                f"{limit} bytes: {listing}", k.span,
                hint="use smaller tiles (block_M/block_N/block_K) or fewer pipeline stages (num_stages)")
    return func.with_lowering(smem_offsets=offsets, smem_bytes=total)

"""Place every shared buffer in the block's dynamic shared memory (CUDA targets).

Before: `Alloc`s of shared buffers anywhere in the kernel.  After: the lowering state's
`smem_offsets` maps each shared buffer to its byte offset (128-byte aligned, which TMA and
16-byte vector accesses need; 1024 for wgmma tiles) and `smem_bytes` is the total.

A view of a tile (`T.view`) gets the tile's offset, and its uses count as uses of the tile.

Buffers whose lifetimes do not overlap share memory.  A lifetime is the span of top-level kernel
statements that touch the buffer (a loop counts as one statement, so everything a loop body uses
stays live for the whole loop; consecutive warp-group branches, which run at the same time, count
as one statement).  Placement is first-fit by start of life.  `insert_syncs` runs
after this pass and compares address ranges, not names, so a buffer reusing another's bytes is
separated from the old one's last readers by a barrier.

Only for a kernel over the limit: Hopper buffers other than wgmma tiles drop from 1024- to
128-byte alignment and fill gaps; then lowering's per-statement scratch buffers (reduction
scratch, `LoweringState.scratch_smem`) get lifetimes of single innermost statements, so the
scratch of two reductions in one loop body shares bytes.  Kernels within the limit keep the
plain plan.

A kernel that needs more than the architecture allows per block is rejected here with every
buffer, its size and the total listed.
"""
from __future__ import annotations

from ..errors import TilecraftError
from ..ir import Alloc, For, If, Kernel, Load, Ref, Seq, Store, View, WarpSpecialize, While, collect, seq
from ..ir.func import PrimFunc
from ..ir.hopper import WarpGroupScope
from ..ir.lowering import SWIZZLE_SM90

ALIGN = 128


def _top_level(body) -> list:
    """The kernel's top-level statements; a warp-specialized block counts as its producer (which
    runs alongside the consumer's first statements) followed by the consumer's statements, and
    consecutive warp-group branches (`T.ws`, `if tx < 32: ... else: ...`) as one statement: their
    threads run them at the same time, so their buffers must not share bytes."""
    out = []
    for s in (body.stmts if isinstance(body, Seq) else (body,)):
        if isinstance(s, WarpGroupScope) and out and _ends_in_branch(out[-1]):
            out[-1] = seq(out[-1], s)
            continue
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


def _ends_in_branch(s) -> bool:
    return isinstance(s, WarpGroupScope) or (isinstance(s, Seq) and bool(s.stmts) and isinstance(s.stmts[-1], WarpGroupScope))


def _lifetimes(k: Kernel, bufs, alias) -> dict:
    stmts = _top_level(k.body)
    life = {}
    for pos, s in enumerate(stmts):
        touched = {alias.get(n.buffer, n.buffer) for n in collect(s, lambda n: isinstance(n, (Load, Store, Ref)))}
        for b in bufs:
            if b in touched:
                lo, hi = life.get(b, (pos, pos))
                life[b] = (min(lo, pos), max(hi, pos))
    for b in bufs:
        life.setdefault(b, (0, len(stmts)))
    return life


def _leaves(s) -> list:
    """`s` as its innermost statements in program order: sequences, loop bodies and the body of an `if`
    without `else` opened; consecutive warp-group branches (their threads run them at the same time)
    stay one statement, as does an `if` with an `else` (a branch on the thread index runs both)."""
    if isinstance(s, Seq):
        out, branch = [], False
        for c in s.stmts:
            if isinstance(c, WarpGroupScope):
                if branch:
                    out[-1] = seq(out[-1], c)     # runs beside the branch before it
                else:
                    out.append(c)
                branch = True
            else:
                out.extend(_leaves(c))
                branch = False
        return out
    if isinstance(s, (For, While)):
        return _leaves(s.body)
    if isinstance(s, If) and s.orelse is None:
        return _leaves(s.then)
    return [s]


def _scratch_lifetimes(k: Kernel, bufs, scratch, alias) -> dict:
    """Lifetimes in innermost statements: a buffer of `scratch` (lowering's per-statement
    scratch, written and then read inside one lowered op, never carried over) lives from the
    first to the last innermost statement touching it, so two reductions in one loop body share
    bytes; every other buffer lives over all the innermost statements of each top-level
    statement touching it, as in `_lifetimes`."""
    life, pos = {}, 0

    def widen(b, lo, hi):
        a, z = life.get(b, (lo, hi))
        life[b] = (min(a, lo), max(z, hi))

    for top in _top_level(k.body):
        leaves = _leaves(top)
        first, last = pos, pos + len(leaves) - 1
        for leaf in leaves:
            for n in collect(leaf, lambda n: isinstance(n, (Load, Store, Ref))):
                b = alias.get(n.buffer, n.buffer)
                if b in bufs:
                    widen(b, pos, pos) if b in scratch else widen(b, first, last)
            pos += 1
    for b in bufs:
        life.setdefault(b, (0, pos))
    return life


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


def _views(k: Kernel, bufs) -> dict:
    """view -> the shared tile it views (T.view); the view's uses keep the tile's bytes live."""
    alias = {}
    for v in collect(k.body, lambda n: isinstance(n, View) and n.buffer.scope == "shared"):
        base = alias.get(v.base, v.base)
        if base not in bufs:
            raise TilecraftError(
                f"T.view({v.base.name}): {v.base.name} has no single storage to view -- a pipelined loop keeps one "
                f"copy of it per stage (it is a T.copy destination in T.Pipelined with num_stages > 1)", v.span,
                hint="view a tile that the pipelined loop does not stage, or use num_stages=1")
        alias[v.buffer] = base
    return alias


def plan_kernel(k: Kernel, layouts: dict, scratch, limit: int) -> tuple[list, dict, int]:
    """One kernel's shared buffers, their offsets and the bytes they need: the plain plan, and the
    fallbacks of the module docstring only while over `limit`.  `layouts`: the lowering state's
    smem_layouts; `scratch`: its scratch_smem.  (lower_cuda asks this too, to decide whether the
    kernel needs compact reduction scratch.)  A T.view gets its tile's offset."""
    bufs = []
    for a in collect(k.body, lambda n: isinstance(n, Alloc)):
        if a.buffer.scope == "shared" and a.buffer not in bufs:
            bufs.append(a.buffer)
    # wgmma reads its operands through descriptors that assume 1024-byte aligned swizzle panels.
    # Every buffer of such a kernel is placed on 1024 bytes (the layout the Hopper kernels were
    # measured and checked with); only when that does not fit do the other buffers (row vectors,
    # mbarriers) keep 128 and fill the gaps between the tiles.
    alias = _views(k, bufs)
    life = _lifetimes(k, bufs, alias)
    hopper = any(layouts.get(b) == SWIZZLE_SM90 for b in bufs)
    offs, size = _place(bufs, life, 1024 if hopper else ALIGN)
    if hopper and size > limit:
        offs, size = _place(bufs, life, lambda b: 1024 if layouts.get(b) == SWIZZLE_SM90 else ALIGN)
    scratch = set(scratch) & set(bufs)
    if size > limit and scratch:
        offs, size = _place(bufs, _scratch_lifetimes(k, set(bufs), scratch, alias),
                            lambda b: 1024 if layouts.get(b) == SWIZZLE_SM90 else ALIGN)
    offs.update({v: offs[b] for v, b in alias.items()})   # a view starts at its tile's first byte
    return bufs, offs, size


def plan_shared_memory(func: PrimFunc, ctx) -> PrimFunc:
    offsets, total = {}, 0
    limit = ctx.target.max_shared_memory
    for k in collect(func.body, lambda n: isinstance(n, Kernel)):
        bufs, offs, size = plan_kernel(k, func.lowering.smem_layouts, func.lowering.scratch_smem, limit)
        offsets.update(offs)
        total = max(total, size)
        if size > limit:
            listing = ", ".join(f"{b.name} {tuple(b.shape)} {b.dtype} = {b.nbytes} B" for b in bufs)
            raise TilecraftError(
                f"the kernel needs {size} bytes of shared memory per block but {ctx.target.arch} allows at most "
                f"{limit} bytes: {listing}", k.span,
                hint="use smaller tiles (block_M/block_N/block_K) or fewer pipeline stages (num_stages)")
    return func.with_lowering(smem_offsets=offsets, smem_bytes=total)

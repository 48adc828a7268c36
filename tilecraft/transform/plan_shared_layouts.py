"""Choose shared-memory layouts (CUDA targets).

Before: shared buffers are plain row-major.  After: the lowering state's `smem_layouts` gives the
swizzle of each shared tile a tensor-core gemm reads: SWIZZLE_SM80, the XOR swizzle of
`tc::swizzle_offset` (16-byte chunks permuted by row), which makes ldmatrix reads bank-conflict
free, or SWIZZLE_SM90 for wgmma operands (the hardware's own modes).  The gemm that
reads a buffer decides (DESIGN.md), not the copy that fills it; `T.annotate_layout` with
`T.make_swizzled_layout` asks for it explicitly.  On sm_90+ a tile that only stages a gemm accumulator
for a T.atomic_add takes SWIZZLE_SM90 too, for the TMA tensor reduce (cuda_ops/tma_reduce.py).  A buffer is swizzled only when its rows are a
power-of-two number (>= 2) of 16-byte chunks; otherwise the request is ignored (still correct).
"""
from __future__ import annotations

from ..ir import Annotate, AnnotationKey, Buffer, Gemm, collect
from ..ir.func import PrimFunc
from ..ir.stmt import SwizzledLayout
from ..ir.lowering import SWIZZLE_SM80, SWIZZLE_SM90, is_wgmma
from .cuda_ops.tma_reduce import staging_tiles


def swizzle_ok(buf: Buffer) -> bool:
    if buf.scope != "shared" or buf.ndim < 2 or buf.dtype.packed:   # int4: no tensor-core reader to swizzle for
        return False
    chunks = buf.shape[-1] * buf.dtype.bytes // 16
    return buf.shape[-1] * buf.dtype.bytes % 16 == 0 and chunks >= 2 and chunks & (chunks - 1) == 0


def plan_shared_layouts(func: PrimFunc, ctx) -> PrimFunc:
    want, hopper = [], []
    for g in collect(func.body, lambda n: isinstance(n, Gemm)):
        if g.plan is None:
            continue
        for r in (g.a, g.b):
            if r.buffer.scope == "shared" and r.covers_whole():
                (hopper if is_wgmma(g.plan) else want).append(r.buffer)
    for a in collect(func.body, lambda n: isinstance(n, Annotate) and n.key == AnnotationKey.LAYOUT):
        for buf, lay in a.value.items():
            if isinstance(lay, SwizzledLayout):
                want.append(buf)
    # wgmma operands use the hardware's own swizzle modes (tc::swizzle_offset_sm90): same bytes as
    # tc::swizzle_offset for rows up to 128 bytes, 1024-byte panels for longer rows
    layouts = {b: SWIZZLE_SM80 for b in want if b not in hopper and swizzle_ok(b)}
    layouts.update({b: SWIZZLE_SM90 for b in hopper})
    # sm_90+: tiles that only stage an accumulator for a T.atomic_add take the same layout and TMA
    # tensor reduces (transform/cuda_ops/tma_reduce.py)
    layouts.update({b: SWIZZLE_SM90 for b in staging_tiles(func, ctx)})
    return func.with_lowering(smem_layouts=layouts)

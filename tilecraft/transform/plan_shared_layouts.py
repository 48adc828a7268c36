"""Choose shared-memory layouts (CUDA targets).

Before: shared buffers are plain row-major.  After: the function attribute `swizzled` is the set
of shared buffers stored with the XOR swizzle of `tc::swizzle_offset` (16-byte chunks permuted
by row), which makes the ldmatrix reads of tensor-core gemms bank-conflict free.  The gemm that
reads a buffer decides (DESIGN.md), not the copy that fills it; `T.annotate_layout` with
`T.make_swizzled_layout` asks for it explicitly.  A buffer is swizzled only when its rows are a
power-of-two number (>= 2) of 16-byte chunks; otherwise the request is ignored (still correct).
"""
from __future__ import annotations

from ..ir import Annotate, Buffer, Gemm, collect
from ..ir.func import PrimFunc
from ..language.annotations import SwizzledLayout
from .infer_layouts import is_wgmma_plan


def swizzle_ok(buf: Buffer) -> bool:
    if buf.scope != "shared" or buf.ndim < 2:
        return False
    chunks = buf.shape[-1] * buf.dtype.bytes // 16
    return buf.shape[-1] * buf.dtype.bytes % 16 == 0 and chunks >= 2 and chunks & (chunks - 1) == 0


def plan_shared_layouts(func: PrimFunc, target) -> PrimFunc:
    plans = func.attr("gemm_plans", {})
    want, hopper = set(), set()
    for g in collect(func.body, lambda n: isinstance(n, Gemm)):
        plan = plans.get(g)
        if plan is None:
            continue
        for r in (g.a, g.b):
            if r.buffer.scope == "shared" and r.covers_whole():
                (hopper if is_wgmma_plan(plan) else want).add(r.buffer)
    for a in collect(func.body, lambda n: isinstance(n, Annotate) and n.key == "layout"):
        for buf, lay in a.value.items():
            if isinstance(lay, SwizzledLayout):
                want.add(buf)
    # wgmma operands use the hardware's own swizzle modes (tc::swizzle_offset_sm90): same bytes as
    # tc::swizzle_offset for rows up to 128 bytes, 1024-byte panels for longer rows
    return func.with_attr("swizzled", {b for b in want - hopper if swizzle_ok(b)}).with_attr("swizzled_sm90", hopper)

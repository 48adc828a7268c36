"""The cp.async loop around one wgmma gemm kept in flight (`WgmmaAsync`, sm_90a, `tc.wgmma_async`;
checked on the H200: 0.81-0.87x cuBLAS):

    for ko in range(n):
        wait until tile ko has landed; fence the async proxy; barrier     (the gemm's lowering)
        issue tile ko's wgmmas, commit; wait until only they are in flight (tile ko-1 retired)
        barrier                                       (every warpgroup retired tile ko-1)
        issue copies of tile ko+S-1 into tile ko-1's buffer; commit
    wait for the last wgmma group (tc::wgmma_drain; loop and drain under `if (n > 0)` when n may
    be 0), then for all copies
"""
from __future__ import annotations

from ...ir import Sync, seq
from ...ir import intrinsics as I
from ...ir.loop_plan import WgmmaAsync
from . import BUILDERS
from .parts import call, drained


@BUILDERS.register(WgmmaAsync)
def build(lp, plan: WgmmaAsync, ctx):
    g = lp.gemm(async_groups=1)
    body = seq(lp.wait, g, Sync(), lp.issue_next(), call(I.CpAsyncCommit()))
    return seq(*lp.prologue(), drained(ctx, lp, body, g), call(I.CpAsyncWaitAll()), Sync())

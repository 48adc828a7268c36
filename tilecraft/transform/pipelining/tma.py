"""The TMA loop (`Tma`, sm_90a, `tc.use_tma`): thread 0 loads each tile with TMA boxes
(ir/layout/tma.py), counted against a per-stage mbarrier, and every thread waits on that mbarrier
instead of cp.async groups and a barrier.  With one async wgmma gemm as the body (`wgmma=True`):

    for ko in range(n):
        wait for full[ko % S] (parity (ko / S) % 2)
        issue tile ko's wgmmas, commit; wait until only they are in flight
        barrier                                       (every warpgroup retired tile ko-1)
        thread 0: expect the bytes of tile ko+S-1 on full[(ko-1) % S], issue its TMA boxes

Any other body (FlashAttention's) keeps the order of the cp.async loop: wait for tile ko, barrier
(everyone is done with tile ko-1), thread 0 issues tile ko+S-1 into that stage, then the body runs
while it loads.  The kernel gets one tensor-map parameter per copy (the lowering state's
`tma_descs`; the launcher builds the maps from the tensors at each call, runtime/tma.py).
"""
from __future__ import annotations

from ...ir import Sync, seq
from ...ir import intrinsics as I
from ...ir.loop_plan import Tma
from . import BUILDERS
from .parts import call, drained, fed, tma_loads, tma_loop


def wgmma_loop(lp, ctx, loads):
    """Wait for tile ko, issue its wgmmas (tile ko-1's retire), barrier, then thread 0 refills
    tile ko-1's stage with tile ko+S-1 while tile ko's wgmmas run."""
    g = lp.gemm(async_groups=1, tma_fed=True)
    return tma_loop(lp, loads, lambda wait, issue: seq(wait, g, Sync(), issue),
                    lambda body: drained(ctx, lp, body, g))


def body_loop(lp, ctx, loads):
    compute = fed(lp)
    return seq(call(I.FenceProxyAsyncShared()), Sync(),
               tma_loop(lp, loads, lambda wait, issue: seq(wait, Sync(), issue, compute), lp.loop))


@BUILDERS.register(Tma)
def build(lp, plan: Tma, ctx):
    loads = tma_loads(ctx, lp, plan.loads)
    return (wgmma_loop if plan.wgmma else body_loop)(lp, ctx, loads)

"""The cp.async loop (`CpAsync`, sm_80+): each shared tile the loop's copies fill has S buffers, and
the copies of iteration ko + S - 1 are issued asynchronously while iteration ko computes:

    prologue: issue copies of iterations 0 .. S-2 into buffers 0 .. S-2, one commit group each
    for ko in range(n):
        wait until at most S-2 groups are in flight   (iteration ko's data has landed)
        barrier                                       (everyone's data visible; buffer (ko-1)%S free)
        issue copies of iteration ko+S-1 into buffer (ko+S-1)%S; commit
        compute on buffer ko%S
    wait for all groups

When the body is a single mma.sync gemm on shared tiles (a plain GEMM main loop), the
synchronisation moves into that gemm, just before its last k16 step (`Gemm.pipeline_hook`,
device/include/tilecraft/pipeline.h), in one of two forms:
- `CpSync.GEMM_HOOK`, a block barrier (`tc::PipelineBarrier`), with one wait + barrier ahead of the
  loop: the same protocol shifted; the barrier inside gemm ko comes after every warp's last read of
  stage ko (so iteration ko+1 may overwrite it) and after iteration ko+1's data has landed;
- `CpSync.MBARRIER`, per-stage mbarriers (`tc::pipe_*`), opt-in with `tc.mbarrier_pipeline`: copies
  of tile t arrive on full[t % S] as they land, readers of tile t arrive on empty[t % S]; each warp
  waits only for the stage it needs.  On the H200 a hand-rewritten kernel gained 4% with one
  128x256x64 block per SM and lost 4% with two 128x128 blocks per SM (benchmarks/gemm_anatomy.py),
  but the generated one measured the same as the block barrier (0.55x cuBLAS either way), so the
  block barrier stays the default.
"""
from __future__ import annotations

from ...ir import Alloc, Buffer, Ref, Sync, const, seq, dtype as dt
from ...ir import intrinsics as I
from ...ir.loop_plan import CpAsync, CpSync
from . import BUILDERS
from .parts import call


def _block(lp, plan, ctx):
    body = seq(lp.wait, Sync(), lp.issue_next(), call(I.CpAsyncCommit()), lp.compute)
    return seq(*lp.prologue(), lp.loop(body), call(I.CpAsyncWaitAll()), Sync())


def _gemm_hook(lp, plan, ctx):
    g = lp.gemm(pipeline_hook=I.call(I.PipelineBarrier(lp.stages - 2)))
    body = seq(lp.issue_next(), call(I.CpAsyncCommit()), g)
    return seq(*lp.prologue(), lp.wait, Sync(), lp.loop(body), call(I.CpAsyncWaitAll()), Sync())


def _mbarrier(lp, plan, ctx):
    S = lp.stages
    bar = Buffer("pipe_bar", (2 * S,), dt.uint64, "shared", span=lp.f.span)
    ref = Ref(bar, (const(0),))
    g = lp.gemm(pipeline_hook=I.call(I.PipeRelease(S), ref, lp.ko))
    head = [Alloc(bar), call(I.PipeInit(S), ref, const(ctx.threads)), Sync()]
    body = seq(lp.issue_next(call(I.PipeAcquire(S), ref, lp.nxt),
                             call(I.PipeCommit(S), ref, lp.nxt)),
               call(I.PipeWait(S), ref, lp.ko), g)
    return seq(*head, *lp.prologue(lambda t: call(I.PipeCommit(S), ref, t)), lp.loop(body),
               call(I.CpAsyncWaitAll()), Sync(), call(I.PipeInval(S), ref), Sync())


_BY_SYNC = {CpSync.BLOCK: _block, CpSync.GEMM_HOOK: _gemm_hook, CpSync.MBARRIER: _mbarrier}


@BUILDERS.register(CpAsync)
def build(lp, plan: CpAsync, ctx):
    return _BY_SYNC[plan.sync](lp, plan, ctx)

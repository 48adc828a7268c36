"""Lower the program's own mbarriers and register budgets for CUDA (meaning in ir/hopper.py).

Before: `BarrierInit`, `BarrierArrive`, `BarrierWait`, `SetMaxNreg` and `WarpGroupScope` as the
front end built them.  After: the first four are device intrinsic calls; `WarpGroupScope` stays
(the later passes spread its tile ops over its threads, transform/warp_groups/, and the printer
guards it by thread index); a kernel that uses any of them starts with `Annotate(MANUAL)` so the
automatic pipelining and warp specialization leave it as written.

- `BarrierInit`: thread 0 initialises every mbarrier of the buffer (with fence.mbarrier_init on
  sm_90), then a block barrier, before anyone arrives or waits.
- `BarrierArrive`: each thread running it arrives once (`tc::mbar_arrive`, release).  On sm_90a a
  fence.proxy.async comes first: a consumer may read the shared memory this thread wrote with
  wgmma (the async proxy), which generic-proxy writes reach only through that fence.
- `BarrierArrive` with `cta` (a remote arrival, T.ClusterKernel only): `tc::mbar_arrive_cluster`
  (mapa + mbarrier.arrive.release.cluster).  A kernel with such arrivals also has a cluster barrier
  (`tc::cluster_sync`) after each mbarrier set-up -- no block arrives on another's mbarrier before
  it is initialised -- and one at its end -- no block exits (its shared memory gone) while another
  may still arrive on its mbarriers.
- `BarrierWait`: `tc::mbar_wait_parity` (acquire); in a kernel with remote arrivals
  `tc::mbar_wait_parity_cluster` (acquire at cluster scope, pairing with their release).
- `TmaCopy` (`T.tma_copy`): a generic lowering, not a TMA load: the copy spread over the threads
  that run it (as T.copy), then a barrier of those threads (the branch's named barrier, or the
  block's), so the whole tile has landed before any of them goes on to arrive on the mbarrier; each
  arrival is preceded by fence.proxy.async on sm_90a (above), so a wgmma reading the tile sees it.
  The meaning (ir/hopper.py) is kept; the load is not asynchronous.
- `SetMaxNreg`: setmaxnreg.inc / .dec on sm_90a; on other targets dropped (with a warning, once,
  from lower_manual_sync_cpu.warn_register_hints at build time), as is
  `T.disable_warp_group_reg_alloc`, which on sm_90a stays for the automatic warp specialization
  to read (it then moves no registers).
An `if` on the thread index around tile work (`if tx < 128:`) becomes such a branch too
(warp_groups/thread_range_branches.py); one on the thread index around tile work that is not whole
warp groups is refused (warp_groups/thread_range_branches.refuse_partial_branch).  Branches are
checked here, where the user's line is still at hand: their warp groups must exist in the block and
be contiguous (warp_groups.check_scope).
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Annotate, AnnotationKey, If, Kernel, Mutator, Sync, binary, const, seq
from ..ir import intrinsics as I
from ..ir.expr import thread_index
from ..ir.blackwell import MmaCommitArrive
from ..ir.func import PrimFunc
from ..errors import TilecraftError
from ..ir.hopper import (REGISTER_FILE, WARP_GROUP, BarrierArrive, BarrierInit, BarrierWait, SetMaxNreg, TmaCopy,
                         WarpGroupScope)
from .warp_groups.thread_range_branches import _interval, as_branches, refuse_partial_branch, thread_aliases
from .warp_groups import MANUAL, check_scope

_CONSTRUCTS = (BarrierArrive, BarrierInit, BarrierWait, SetMaxNreg, TmaCopy, WarpGroupScope)


class _Lower(Mutator):
    def __init__(self, target):
        super().__init__()
        self.target = target
        self.sm90a = target.has("wgmma")
        self.block_threads = 0
        self.remote = False   # the kernel has remote arrivals (T.mbarrier_arrive(bar, cta_id))

    def visit_Kernel(self, k: Kernel):
        from ..ir import collect
        self.block_threads = k.num_threads
        self.kernel = k
        self.tids = thread_aliases(k)
        self.branches = 0
        self.remote = bool(collect(k.body, lambda n: isinstance(n, BarrierArrive) and n.cta is not None))
        self.scope = None
        self.thread_if = None   # inside an ordinary `if` on the thread index: its interval, or () if none
        body = Mutator.generic(self, k).body
        if self.remote:   # no block leaves while another may still arrive on its mbarriers
            body = seq(body, I.evaluate(I.ClusterSync(), span=k.span))
        if self.sm90a:
            check_register_file(body, self.block_threads)
        if not self.branches and not collect(k.body, lambda n: isinstance(n, _CONSTRUCTS)):
            return replace(k, body=body)  # only the register hint, if anything
        return replace(k, body=seq(Annotate(MANUAL, True, span=k.span), body))

    def visit_If(self, s: If):
        """`if tx < 128:` around tile work: a warp-group branch (warp_groups/thread_range_branches.py)."""
        out = as_branches(s, self.tids, self.block_threads, lambda x: x)
        if out is None:
            refuse_partial_branch(s, self.kernel, self.tids, self.block_threads)
            from ..ir import Var, collect
            if not collect(s.cond, lambda n: isinstance(n, Var) and n in self.tids):
                return Mutator.generic(self, s)
            outer, self.thread_if = self.thread_if, _interval(s.cond, self.tids, self.block_threads) or ()
            try:
                return Mutator.generic(self, s)
            finally:
                self.thread_if = outer
        self.branches += 1
        return self.visit(out)

    def visit_WarpGroupScope(self, s: WarpGroupScope):
        check_scope(s, self.block_threads, self.target.has("mma_sync"), self.sm90a)
        outer, self.scope = self.scope, s
        try:
            return Mutator.generic(self, s)
        finally:
            self.scope = outer

    def visit_BarrierInit(self, s: BarrierInit):
        from ..ir import Ref
        inits = [I.evaluate(I.MbarInit(), Ref(s.buffer, (const(i),)), const(c), span=s.span)
                 for i, c in enumerate(s.counts)]
        init = seq(If(binary("==", thread_index(), 0), seq(*inits), span=s.span), Sync(span=s.span))
        if self.remote:   # every block's mbarriers are set up before any block arrives on another's
            return seq(init, I.evaluate(I.ClusterSync(), span=s.span))
        return init

    def visit_BarrierArrive(self, s: BarrierArrive):
        if s.cta is not None:
            arrive = I.evaluate(I.MbarArriveCluster(), s.barrier, s.cta, span=s.span)
        else:
            arrive = I.evaluate(I.MbarArrive(), s.barrier, span=s.span)
        if self.sm90a:
            return seq(I.evaluate(I.FenceProxyAsyncShared(), span=s.span), arrive)
        return arrive

    def visit_BarrierWait(self, s: BarrierWait):
        wait = I.MbarWaitParityCluster() if self.remote else I.MbarWaitParity()
        return I.evaluate(wait, s.barrier, s.parity, span=s.span)

    def visit_Gemm(self, g):
        """A tcgen05 gemm into tensor memory (a shared tile) in the CPU target's thread-level mode
        (CUDA targets refuse tcgen05 before this pass, validate/arch.py): spread over the threads that
        run it (the branch's, or the block's), it is complete once each has done its share -- a
        barrier of those threads after it, so a commit that follows may arrive at once."""
        if g.c.buffer.scope != "shared" or self.target.has("mma_sync"):
            return g
        return seq(g, Sync(span=g.span))

    def visit_MmaCommitArrive(self, s: MmaCommitArrive):
        """The commit's one arrival (the gemms before it are complete: visit_Gemm): by the first
        thread of the branch or block running it; under an `if` on the thread index, by the one
        thread it selects (`if tid == 0:`)."""
        arrive = I.evaluate(I.MbarArrive(), s.barrier, span=s.span)
        if self.thread_if is not None:
            if self.thread_if and self.thread_if[1] - self.thread_if[0] == 1:
                return arrive
            raise TilecraftError("a tcgen05 commit (T.tcgen05_gemm(mbar=...) / T.tcgen05_mma_arrive) under an `if` on "
                                 "the thread index that does not select one thread: in the CPU target's thread-level "
                                 "mode it is one arrival, and tilecraft cannot tell which of the threads that run it "
                                 "makes it", s.span,
                                 hint="run it under `if tid == 0:` (one thread), in a branch of whole warps, or "
                                      "unconditionally")
        first = 0 if self.scope is None else self.scope.bounds(self.block_threads)[0]
        return If(binary("==", thread_index(), first), arrive, span=s.span)

    def visit_TmaCopy(self, s: TmaCopy):
        return seq(s.copy, Sync(span=s.span))

    def visit_SetMaxNreg(self, s: SetMaxNreg):
        if not self.sm90a:  # warned about by lower_manual_sync_cpu.warn_register_hints
            return seq()
        intr = I.WarpgroupRegAlloc(s.regs) if s.inc else I.WarpgroupRegDealloc(s.regs)
        return I.evaluate(intr, span=s.span)

    def visit_Annotate(self, s):
        if s.key == AnnotationKey.NO_SET_MAX_NREG and not self.sm90a:  # warned about by warn_register_hints
            return seq()
        return s


def check_register_file(body, block_threads: int) -> None:
    """The budgets the warp-group branches ask for with T.set_max_nreg must fit in the SM's
    register file together: setmaxnreg.inc waits until the registers it asks for are free, so a
    sum above 65,536 hangs the kernel on the GPU instead of failing.  Checked when every warp group
    of the block names its budget (a group that names none keeps what the launch gave it)."""
    from ..ir import Evaluate, collect
    budgets, first = {}, None
    for scope in collect(body, lambda n: isinstance(n, WarpGroupScope)):
        sets = collect(scope.body, lambda n: isinstance(n, Evaluate) and isinstance(n.value, I.IntrinsicCall)
                       and n.value.intrinsic.family == "setmaxnreg")
        if not sets:
            continue
        regs = max(s.value.intrinsic.regs for s in sets)
        first = first or sets[0]
        for g in scope.groups:
            budgets[g] = max(budgets.get(g, 0), regs)
    n_groups = -(-block_threads // WARP_GROUP)
    if first is None or set(budgets) != set(range(n_groups)):
        return
    total = sum(r * min(WARP_GROUP, block_threads - g * WARP_GROUP) for g, r in budgets.items())
    if total > REGISTER_FILE:
        ask = " + ".join(f"{budgets[g]} (warp group {g})" for g in sorted(budgets))
        raise TilecraftError(
            f"T.set_max_nreg: the warp groups ask for {ask} registers per thread, {total} registers in all for "
            f"{block_threads} threads; an SM has {REGISTER_FILE}.  setmaxnreg.inc would wait forever for registers "
            f"that never become free (the kernel hangs).  Lower a budget, e.g. the producer's to 24 "
            f"(TileLang's MLA kernels use 240 + 240 + 24 for 384 threads)", first.span)


def lower_manual_sync_cuda(func: PrimFunc, ctx) -> PrimFunc:
    return func.with_body(_Lower(ctx.target).visit(func.body))

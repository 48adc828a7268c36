"""Lower the manual Hopper constructs for the CPU target (the reference; meaning in ir/hopper.py).

Before: the body may contain `WarpGroupScope`, `BarrierInit`, `BarrierArrive`, `BarrierWait`,
`SetMaxNreg`, `TmaCopy`.  After: none of them.  One CPU thread runs a whole block, every statement covering
its whole tile, in program order:

- a `T.ws(...)` branch runs once if any of its warp groups exists in the block (its threads are
  the block's threads in those groups), else not at all;
- an mbarrier is simulated (tilecraft_cpu.h): an arrival counts once for every thread that runs
  it (all the block's threads outside a branch, the branch's inside one), and a wait checks that
  the phase it names has completed.  A wait that only a later statement could satisfy means the
  program needs its warp groups to run at the same time; it has no sequential meaning.  Such
  programs are found before this pass (warp_groups/concurrent_waits.py) and run with their threads emulated
  (cpu_threads.py); the check stays for what that analysis leaves here (a simulation over its
  budget): the kernel fails with an error naming the wait's file:line (codegen/cpp_manual_sync.py)
  instead of hanging or computing something else;
- an arrival on another block's mbarrier (`BarrierArrive` with `cta`, a cluster's remote arrival)
  is refused at its line: such programs run in the thread-level mode (cpu_threads.py), which runs a
  cluster's blocks together; this path is reached only when pass_configs turn that mode off;
- a tcgen05 commit (`MmaCommitArrive`, ir/blackwell.py) is one arrival, whoever runs it: the gemms
  before it have completed when it runs;
- `T.tma_copy` is its copy: the tile holds the data when the statement ends, and the transaction's
  bytes add nothing to the phase (ir/hopper.py);
- register budgets do not exist: `T.set_max_nreg` is dropped (warn_register_hints warns once);
- an `if` on the thread index around tile work (`if tx < 32: ... else: ...`) is a branch of those
  threads, as on CUDA (warp_groups/thread_range_branches.py): each branch runs once, in program order.
"""
from __future__ import annotations

import warnings

from ..ir import AnnotationKey, If, Kernel, Mutator, Ref, const, seq
from ..ir import intrinsics as I
from ..ir.blackwell import MmaCommitArrive
from ..ir.func import PrimFunc
from ..ir.hopper import WARP_GROUP, BarrierArrive, BarrierInit, BarrierWait, SetMaxNreg, TmaCopy, WarpGroupScope
from .warp_groups.thread_range_branches import as_branches, refuse_partial_branch, thread_aliases

_WARNED: set = set()


def warn_not_applicable(key, span, message) -> None:
    """Once per process and construct: the construct is accepted but does nothing on this target."""
    if key in _WARNED:
        return
    _WARNED.add(key)
    if span is not None:
        warnings.warn_explicit(message, UserWarning, span.file, span.line)
    else:
        warnings.warn(message, UserWarning, stacklevel=2)


def warn_register_hints(func, target) -> None:
    """`T.set_max_nreg`, the `T.annotate_*_reg_*` hints and `T.disable_warp_group_reg_alloc`
    apply on sm_90a only: elsewhere each is accepted, dropped by lowering, and warned about once
    here (compiler/build.py calls this before its cache lookup, so a cached kernel warns too)."""
    if target.kind == "cuda" and target.has("wgmma"):
        return
    from ..ir import Annotate, collect
    where = "the CPU target" if target.kind == "cpu" else target.arch
    hints = collect(func.body, lambda n: isinstance(n, SetMaxNreg))
    if hints:
        warn_not_applicable(("set_max_nreg", where), hints[0].span,
                            f"T.set_max_nreg (and T.annotate_*_reg_* hints) do not apply on {where} (register "
                            f"budgets exist on sm_90a only): ignored; results do not change")
    off = collect(func.body, lambda n: isinstance(n, Annotate) and n.key == AnnotationKey.NO_SET_MAX_NREG)
    if off:
        warn_not_applicable((AnnotationKey.NO_SET_MAX_NREG, where), off[0].span,
                            f"T.disable_warp_group_reg_alloc does not apply on {where} (register budgets exist "
                            f"on sm_90a only): ignored; results do not change")


def group_threads(groups, block_threads: int) -> int:
    return sum(max(0, min(WARP_GROUP, block_threads - g * WARP_GROUP)) for g in groups)


class _Lower(Mutator):
    def __init__(self):
        super().__init__()
        self.block_threads = 0
        self.groups: frozenset = frozenset()   # the warp groups running the current statement
        self.lanes = None                       # inside a branch of whole warps: its thread count
        self.sites = 0
        self.kernel = None
        self.tids: set = set()

    def visit_Kernel(self, k: Kernel):
        saved = self.block_threads, self.groups, self.kernel, self.tids
        self.block_threads = k.num_threads
        self.groups = frozenset(range(-(-k.num_threads // WARP_GROUP)))
        self.kernel, self.tids = k, thread_aliases(k)
        try:
            return Mutator.generic(self, k)
        finally:
            self.block_threads, self.groups, self.kernel, self.tids = saved

    def visit_If(self, s: If):
        """`if tx < 32:` around tile work: a branch of those threads (warp_groups/thread_range_branches.py)."""
        out = as_branches(s, self.tids, self.block_threads, lambda x: x)
        if out is None:
            refuse_partial_branch(s, self.kernel, self.tids, self.block_threads)
            return Mutator.generic(self, s)
        return self.visit(out)

    def visit_WarpGroupScope(self, s: WarpGroupScope):
        groups = self.groups & frozenset(s.groups)
        if not groups or not s.threads_in(self.block_threads):
            return seq()   # no thread of the block is in these warp groups
        saved, self.groups = (self.groups, self.lanes), groups
        self.lanes = s.threads_in(self.block_threads) if s.lanes else None
        try:
            return self.visit(s.body)
        finally:
            self.groups, self.lanes = saved

    def visit_BarrierInit(self, s: BarrierInit):
        return seq(*[I.evaluate(I.MbarInit(), Ref(s.buffer, (const(i),)), const(c), span=s.span)
                     for i, c in enumerate(s.counts)])

    def visit_BarrierArrive(self, s: BarrierArrive):
        if s.cta is not None:   # transform/cpu_threads.py sends these to the thread-level mode unless it is off
            from ..errors import TilecraftError
            raise TilecraftError(
                "T.mbarrier_arrive(bar, cta_id): an arrival on another block's mbarrier of the cluster needs the "
                "cluster's blocks to run together, which the CPU target does in its thread-level mode only; "
                "pass_configs turn that mode off (tc.cpu_threads False)", s.span,
                hint="leave tc.cpu_threads unset: such a program then runs with its cluster's threads emulated")
        n = self.lanes if self.lanes is not None else group_threads(self.groups, self.block_threads)
        return I.evaluate(I.CpuMbarArrive(), self.visit(s.barrier), const(n), span=s.span)

    def visit_MmaCommitArrive(self, s: MmaCommitArrive):
        return I.evaluate(I.CpuMbarArrive(), self.visit(s.barrier), const(1), span=s.span)

    def visit_BarrierWait(self, s: BarrierWait):
        self.sites += 1
        where = s.span.short() if s.span is not None else "a barrier wait"
        src = f" ({s.span.source_line.strip()})" if s.span is not None and s.span.source_line else ""
        msg = (f"{where}: this mbarrier wait{src} cannot be satisfied on the CPU target: the phase it "
               f"waits for is completed only by statements that come after it. The CPU target (the "
               f"reference) runs a block's statements in program order, one T.ws branch after another, "
               f"so every arrival a wait depends on must come before the wait in the program; this "
               f"program needs its warp groups to run concurrently (CUDA target only)")
        return I.evaluate(I.CpuMbarWait(self.sites, msg), self.visit(s.barrier), self.visit(s.parity),
                          span=s.span)

    def visit_TmaCopy(self, s: TmaCopy):
        return self.visit(s.copy)

    def visit_Annotate(self, s):  # warned about by warn_register_hints
        return seq() if s.key == AnnotationKey.NO_SET_MAX_NREG else s

    def visit_SetMaxNreg(self, s: SetMaxNreg):  # warned about by warn_register_hints
        return seq()


def lower_manual_sync_cpu(func: PrimFunc, ctx) -> PrimFunc:
    if func.body is None:
        return func
    return func.with_body(_Lower().visit(func.body))

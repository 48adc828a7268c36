"""Lower the manual Hopper constructs for the CPU target (the reference; meaning in ir/hopper.py).

Before: the body may contain `WarpGroupScope`, `BarrierInit`, `BarrierArrive`, `BarrierWait`,
`SetMaxNreg`.  After: none of them.  One CPU thread runs a whole block, every statement covering
its whole tile, in program order:

- a `T.ws(...)` branch runs once if any of its warp groups exists in the block (its threads are
  the block's threads in those groups), else not at all;
- an mbarrier is simulated (tilecraft_cpu.h): an arrival counts once for every thread that runs
  it (all the block's threads outside a branch, the branch's inside one), and a wait checks that
  the phase it names has completed.  A wait that only a later statement could satisfy means the
  program needs its warp groups to run at the same time; it has no sequential meaning, so the
  kernel fails with an error naming the wait's file:line (codegen/cpp_manual_sync.py) instead of
  hanging or computing something else;
- register budgets do not exist: `T.set_max_nreg` is dropped with a warning (once).
"""
from __future__ import annotations

import warnings

from ..ir import Kernel, Mutator, Ref, const, seq
from ..ir import intrinsics as I
from ..ir.func import PrimFunc
from ..ir.hopper import WARP_GROUP, BarrierArrive, BarrierInit, BarrierWait, SetMaxNreg, WarpGroupScope

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


def group_threads(groups, block_threads: int) -> int:
    return sum(max(0, min(WARP_GROUP, block_threads - g * WARP_GROUP)) for g in groups)


class _Lower(Mutator):
    def __init__(self):
        super().__init__()
        self.block_threads = 0
        self.groups: frozenset = frozenset()   # the warp groups running the current statement
        self.sites = 0

    def visit_Kernel(self, k: Kernel):
        saved = self.block_threads, self.groups
        self.block_threads = k.num_threads
        self.groups = frozenset(range(-(-k.num_threads // WARP_GROUP)))
        try:
            return Mutator.generic(self, k)
        finally:
            self.block_threads, self.groups = saved

    def visit_WarpGroupScope(self, s: WarpGroupScope):
        groups = self.groups & frozenset(s.groups)
        if not groups:
            return seq()   # no thread of the block is in these warp groups
        saved, self.groups = self.groups, groups
        try:
            return self.visit(s.body)
        finally:
            self.groups = saved

    def visit_BarrierInit(self, s: BarrierInit):
        return seq(*[I.evaluate(I.MbarInit(), Ref(s.buffer, (const(i),)), const(c), span=s.span)
                     for i, c in enumerate(s.counts)])

    def visit_BarrierArrive(self, s: BarrierArrive):
        n = group_threads(self.groups, self.block_threads)
        return I.evaluate(I.CpuMbarArrive(), self.visit(s.barrier), const(n), span=s.span)

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

    def visit_Annotate(self, s):
        if s.key != "no_set_max_nreg":
            return s
        warn_not_applicable(("no_set_max_nreg", "cpu"), s.span,
                            "T.disable_warp_group_reg_alloc does not apply on the CPU target (register budgets "
                            "exist on sm_90a only): ignored; results do not change")
        return seq()

    def visit_SetMaxNreg(self, s: SetMaxNreg):
        warn_not_applicable(("set_max_nreg", "cpu"), s.span,
                            "T.set_max_nreg (and T.annotate_*_reg_* hints) do not apply on the CPU target "
                            "(register budgets exist on sm_90a only): ignored; results do not change")
        return seq()


def lower_manual_sync_cpu(func: PrimFunc, target) -> PrimFunc:
    if func.body is None:
        return func
    return func.with_body(_Lower().visit(func.body))

"""Which values of a lowered kernel may differ between the threads of a block.

`insert_syncs` needs it: a barrier may go inside an `if` only when every thread of the block takes
the same branch (a `__syncthreads()` that some threads skip hangs the block, or releases it
early).  The tile ops of a program's block-uniform `if` (`if bid < batch:` around a whole
attention tile in a persistent kernel) communicate through shared memory like any others, and
need their barriers inside it; a per-thread guard (`if (tc_tid < 4)`, `if (acc[r] > 0)`) must keep
its barriers outside.

A value is *thread-varying* when it is computed from the thread index (`tc_tid`, the kernel's
thread variables), from a register array that holds different values in different threads, from
a load at a thread-varying index, or from a device intrinsic's result (a shuffle, an atomic's old
value: conservatively, every intrinsic).  A register array (fragment, local, var) varies when a
store into it has a thread-varying index or value, or happens under thread-varying control, or
when an intrinsic writes it (an mma accumulator).  Shared and global loads at block-uniform
indices are uniform (barriers order the writes before them).  Everything else is uniform.  The
analysis is a fixpoint over the whole kernel, so a value that varies only through a later
assignment in a loop is still found.  Conservative: a uniform value may be called varying (its
`if` then keeps its barriers outside, as before), never the reverse.
"""
from __future__ import annotations

from .expr import BuiltinVar, Expr, Load, Ref, TID, Var
from .functor import collect
from .hopper import WarpGroupScope
from .intrinsics import IntrinsicCall
from .stmt import Alloc, Break, Evaluate, For, If, Kernel, Let, Seq, Store, WarpSpecialize, While

_REGISTERS = ("fragment", "local", "var")


class Uniformity:
    """The thread-varying values of one kernel (`varies(expr)`)."""

    def __init__(self, kernel: Kernel):
        self.vars: set = set(kernel.thread_vars)   # Vars that may differ between threads
        self.regs: set = set()                     # register buffers that may differ between threads
        while True:
            before = (len(self.vars), len(self.regs))
            self._stmt(kernel.body, False)
            if (len(self.vars), len(self.regs)) == before:
                break

    def varies(self, e) -> bool:
        """Whether expression `e` may take different values in different threads of the block."""
        if not isinstance(e, Expr):
            return False
        for n in collect(e, lambda n: isinstance(n, (Var, Load, Ref, IntrinsicCall))):
            if isinstance(n, IntrinsicCall):
                return True
            if isinstance(n, BuiltinVar):
                if n.name == TID:
                    return True
            elif isinstance(n, Var):
                if n in self.vars:
                    return True
            elif isinstance(n, Load) and n.buffer.scope in _REGISTERS and n.buffer in self.regs:
                return True
        return False

    def _stmt(self, s, ctl: bool) -> None:
        """Walk `s` under control flow that is thread-varying when `ctl`."""
        if s is None:
            return
        if isinstance(s, Seq):
            for x in s.stmts:
                self._stmt(x, ctl)
        elif isinstance(s, Let):
            if ctl or self.varies(s.value):
                self.vars.add(s.var)
        elif isinstance(s, For):
            inner = ctl or self.varies(s.start) or self.varies(s.extent) or self._varying_break(s.body)
            if inner:
                self.vars.add(s.var)
            self._stmt(s.body, inner)
        elif isinstance(s, While):
            self._stmt(s.body, ctl or self.varies(s.cond) or self._varying_break(s.body))
        elif isinstance(s, If):
            inner = ctl or self.varies(s.cond)
            self._stmt(s.then, inner)
            self._stmt(s.orelse, inner)
        elif isinstance(s, Store):
            if s.buffer.scope in _REGISTERS and (ctl or self.varies(s.value)
                                                 or any(self.varies(i) for i in s.indices)):
                self.regs.add(s.buffer)
        elif isinstance(s, Evaluate):
            for r in collect(s.value, lambda n: isinstance(n, Ref)):
                if r.buffer.scope in _REGISTERS:
                    self.regs.add(r.buffer)
        elif isinstance(s, WarpGroupScope):
            self._stmt(s.body, ctl)
        elif isinstance(s, WarpSpecialize):
            self._stmt(s.producer, ctl)
            self._stmt(s.consumer, ctl)
        elif isinstance(s, Alloc):
            if s.buffer.scope in _REGISTERS and s.init is not None and (ctl or self.varies(s.init)):
                self.regs.add(s.buffer)
        elif isinstance(s, Kernel):
            self._stmt(s.body, ctl)
        # Sync, Break, Annotate, View: no values

    def _varying_break(self, body) -> bool:
        """Whether a `break` under a thread-varying `if` may leave the loop in some threads only (the
        rest of the loop then runs under thread-varying control)."""
        return any(self.varies(i.cond) and collect(i, lambda n: isinstance(n, Break))
                   for i in collect(body, lambda n: isinstance(n, If)))

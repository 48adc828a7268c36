"""Does a kernel's mbarrier protocol work in program order?  (The CPU target's choice of path.)

The CPU target's tile path runs a block's `T.ws` branches one after another
(lower_manual_sync_cpu.py); a wait there succeeds only if every arrival it needs came earlier in
program order.  A producer/consumer program whose roles wait on each other's later iterations needs
its warp groups to run at the same time: the CPU target then emulates the block's threads
(cpu_threads.py).  This decides which, before any code is generated, by running the kernel's
mbarrier operations -- as lower_manual_sync_cpu lowered them: `MbarInit`, `CpuMbarArrive` (each
arrival counts the threads that run it), `CpuMbarWait` -- in program order over the loops with
compile-time trip counts, with the counters of tilecraft_cpu.h.

A wait that fails, or a barrier operation whose barrier, parity, count or enclosing loop bounds and
conditions cannot be evaluated at compile time (they read a block index or a tensor), means
"emulate the threads": emulation gives every program its CUDA meaning, program order only some.
A kernel whose simulation would take more than `BUDGET` barrier operations keeps the tile path
(which still checks every wait when it runs).
"""
from __future__ import annotations

from ...ir import Evaluate, For, If, Kernel, Let, Seq, While, collect
from ...ir import expr as E
from ...ir import intrinsics as I
from ...ir.hopper import WarpGroupScope

BUDGET = 200_000

_OPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b, "min": min, "max": max,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "and": lambda a, b: bool(a and b),
    "or": lambda a, b: bool(a or b), "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
    "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
}


class _Unknown(Exception):
    """A value the simulation needs is not known at compile time."""


class _Failed(Exception):
    pass


class _Budget(Exception):
    pass


def _barrier_ops(s) -> bool:
    return bool(collect(s, lambda n: isinstance(n, I.IntrinsicCall) and isinstance(
        n.intrinsic, (I.MbarInit, I.CpuMbarArrive, I.CpuMbarWait))))


class _Run:
    def __init__(self):
        self.env: dict = {}
        self.bars: dict = {}   # (buffer, index) -> [expected, pending, phases]
        self.steps = 0

    def value(self, e):
        if isinstance(e, E.Const):
            return e.value
        if isinstance(e, E.Var):
            if e in self.env:
                return self.env[e]
            raise _Unknown
        if isinstance(e, E.Binary) and e.op in _OPS:
            a, b = self.value(e.a), self.value(e.b)
            if e.op in ("//", "%") and b == 0:
                raise _Unknown
            return _OPS[e.op](a, b)
        if isinstance(e, E.Unary):
            a = self.value(e.a)
            return -a if e.op == "neg" else (not a) if e.op == "not" else ~a
        if isinstance(e, E.Cast) and (e.dtype.is_int or e.dtype.is_bool):
            v = self.value(e.value)
            return bool(v) if e.dtype.is_bool else int(v)
        if isinstance(e, E.Select):
            return self.value(e.a) if self.value(e.cond) else self.value(e.b)
        raise _Unknown

    def bar(self, ref):
        return self.bars.setdefault((ref.buffer, tuple(self.value(i) for i in ref.indices)), [0, 0, 0])

    def stmt(self, s):
        if s is None:
            return
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, Let):
            try:
                self.env[s.var] = self.value(s.value)
            except _Unknown:
                self.env.pop(s.var, None)
        elif isinstance(s, Evaluate):
            self.call(s.value)
        elif not _barrier_ops(s):
            return
        elif isinstance(s, For):
            start, extent = self.value(s.start), self.value(s.extent)
            for i in range(start, start + extent, s.step):
                self.env[s.var] = i
                self.stmt(s.body)
        elif isinstance(s, If):
            self.stmt(s.then if self.value(s.cond) else s.orelse)
        elif isinstance(s, (While, Kernel)):
            raise _Unknown
        elif isinstance(s, WarpGroupScope):
            self.stmt(s.body)
        else:
            for child in _children(s):
                self.stmt(child)

    def call(self, c):
        if not isinstance(c, I.IntrinsicCall):
            return
        intr = c.intrinsic
        if not isinstance(intr, (I.MbarInit, I.CpuMbarArrive, I.CpuMbarWait)):
            return
        self.steps += 1
        if self.steps > BUDGET:
            raise _Budget
        b = self.bar(c.args[0])
        if isinstance(intr, I.MbarInit):
            b[:] = [self.value(c.args[1]) & 0xFFFFF, 0, 0]
        elif isinstance(intr, I.CpuMbarArrive):
            n = self.value(c.args[1])
            if b[0] == 0:
                return
            while n > 0:
                take = min(b[0] - b[1], n)
                b[1] += take
                n -= take
                if b[1] == b[0]:
                    b[1] = 0
                    b[2] += 1
        elif (b[2] & 1) == (self.value(c.args[1]) & 1):
            raise _Failed(intr)


def _children(s):
    from dataclasses import fields
    for f in fields(s):
        v = getattr(s, f.name)
        if isinstance(v, (Seq, For, If, Let, Evaluate, WarpGroupScope, While)):
            yield v


def needs_concurrent_warp_groups(k: Kernel) -> str | None:
    """Why kernel `k` (lowered by lower_manual_sync_cpu) needs its warp groups to run concurrently,
    or None when its waits all succeed in program order (or it has none)."""
    if not _barrier_ops(k.body):
        return None
    run = _Run()
    try:
        run.stmt(k.body)
    except _Failed as f:
        return f"{':'.join(f.args[0].where.split(':')[:2])}: an mbarrier wait that only a later statement satisfies"
    except _Unknown:
        return "mbarrier operations whose barrier, parity or loop bounds are known only at run time"
    except _Budget:
        return None
    return None

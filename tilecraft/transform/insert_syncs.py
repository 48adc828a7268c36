"""Insert `__syncthreads()` where threads of a block communicate through shared memory.

Before: thread-level IR without barriers (except those lowering put inside reductions).  After:
a `Sync` before every statement that reads a shared buffer written since the last barrier, or
writes one read or written since then (read-after-write and write-after-read across threads),
and at the end of a loop body whose accesses would conflict with the next iteration's.
Conservative by design: a missing barrier is a race (a moving wrong answer), an extra one costs
only a little time.
"""
from __future__ import annotations

import threading

from ..ir import Evaluate, For, If, Kernel, Load, Ref, Seq, Store, Sync, collect, seq
from ..ir.func import PrimFunc


_WRITERS = ("tc::atomic", "tc::cp_async", "tc::vec_store")


def _access(stmt) -> tuple[set, set]:
    """Shared buffers `stmt` reads and writes.  Copies issued by a software pipeline are left
    out: the pipeline places its own wait and barrier around them."""
    reads, writes = set(), set()
    skip = set()
    for c in collect(stmt, lambda n: isinstance(n, Evaluate)):
        op = getattr(c.value, "op", "")
        args = getattr(c.value, "args", ())
        if "_pipelined" in op or op.startswith("tc::tma_"):
            skip |= {id(a) for a in args}
        elif op.startswith(_WRITERS) and args and isinstance(args[0], Ref):
            if args[0].buffer.scope == "shared":
                writes.add(args[0].buffer)
            skip.add(id(args[0]))
    for n in collect(stmt, lambda n: isinstance(n, (Load, Store, Ref))):
        if n.buffer.scope != "shared" or id(n) in skip:
            continue
        (writes if isinstance(n, Store) else reads).add(n.buffer)
    return reads, writes


_TLS = threading.local()  # per compiling thread: ranges = buffer -> (first byte, end byte) in shared memory


def _ranges() -> dict:
    """The shared-memory byte ranges of the kernel this thread is fixing (threads compile at once)."""
    return _TLS.__dict__.setdefault("ranges", {})


def _overlap(xs, ys) -> bool:
    """Whether two sets of shared buffers share any byte (buffers may reuse each other's memory)."""
    if xs & ys:
        return True
    _RANGES = _ranges()
    for x in xs:
        rx = _RANGES.get(x)
        if rx is None:
            continue
        for y in ys:
            ry = _RANGES.get(y)
            if ry is not None and rx[0] < ry[1] and ry[0] < rx[1]:
                return True
    return False


class _State:
    def __init__(self):
        self.reads: set = set()
        self.writes: set = set()

    def conflicts(self, r, w, waw: bool = True) -> bool:
        return _overlap(r, self.writes) or (waw and _overlap(w, self.writes)) or _overlap(w, self.reads)

    def add(self, r, w):
        self.reads |= r
        self.writes |= w

    def clear(self):
        self.reads, self.writes = set(), set()


def _block(stmts, state: _State) -> list:
    out = []
    for s in stmts:
        if isinstance(s, Sync):
            state.clear()
            out.append(s)
            continue
        if isinstance(s, For) and collect(s.body, lambda n: isinstance(n, (Load, Store, Ref))):
            r, w = _access(s)
            if state.conflicts(r, w):
                out.append(Sync())
                state.clear()
            inner = _State()
            body = _block(_stmts(s.body), inner)
            # loop-carried: what the end of an iteration did vs what the start of the next does.
            # Lowering's per-thread element loops (unrolled, or marked "once") write each element
            # once, from one thread: write-after-write between their iterations is not a race.
            first_r, first_w = _first_access(s.body)
            once = s.kind == "unroll" or s.annotation("once", False)
            if inner.conflicts(first_r, first_w, waw=not once) and (inner.reads or inner.writes):
                body.append(Sync())
                inner.clear()
            state.add(r, w)
            out.append(For(s.var, s.start, s.extent, s.kind, seq(*body), s.step, s.annotations, span=s.span))
            continue
        if isinstance(s, If):
            r, w = _access(s)
            if state.conflicts(r, w):
                out.append(Sync())
                state.clear()
            state.add(r, w)
            out.append(s)
            continue
        r, w = _access(s)
        if (r or w) and state.conflicts(r, w):
            out.append(Sync())
            state.clear()
        state.add(r, w)
        out.append(s)
    return out


def _first_access(body):
    for s in _stmts(body):
        r, w = _access(s)
        if r or w:
            return r, w
    return set(), set()


def _stmts(s) -> list:
    """The statements of a body, nested sequences spliced in (lowering returns a tile op's code as
    a sequence inside the enclosing one; its shared-memory steps need barriers between them too)."""
    if not isinstance(s, Seq):
        return [s]
    out = []
    for x in s.stmts:
        out.extend(_stmts(x))
    return out


def insert_syncs(func: PrimFunc, target) -> PrimFunc:
    _RANGES = _ranges()
    _RANGES.clear()
    for b, off in func.attr("smem_offsets", {}).items():
        _RANGES[b] = (off, off + b.nbytes)
    def fix(k: Kernel):
        body = _block(_stmts(k.body), _State())
        return Kernel(k.grid, k.block_vars, k.threads, seq(*body), k.thread_vars, span=k.span)
    stmts = [fix(s) if isinstance(s, Kernel) else s for s in _stmts(func.body)]
    return func.with_body(seq(*stmts))

"""Insert `__syncthreads()` where threads of a block communicate through shared memory.

Before: thread-level IR without barriers (except those lowering put inside reductions).  After:
a `Sync` before every statement that reads a shared buffer written since the last barrier, or
writes one read or written since then (read-after-write and write-after-read across threads),
and at the end of a loop body (`For` or `While`, whose condition counts as the start of the next
iteration) whose accesses would conflict with the next iteration's.  An `if` whose condition is
the same in every thread of the block (ir/uniformity.py: `if bid < batch:` around a persistent
kernel's whole tile) gets its barriers inside its branches, like any other body; an `if` on a
per-thread value (a guard on `tc_tid`, a register) is one statement, ordered by barriers before and
after it, since a barrier that some threads skip would hang or release the block early.
Conservative by design: a missing barrier is a race (a moving wrong answer), an extra one costs
only a little time.

Inside a `T.ws` branch (ir/hopper.py) a `Sync` is a barrier of the branch's threads (the printer
makes it a named barrier).  The program orders its branches against each other with its own
mbarriers, so accesses in one branch are not checked against another's; statements of the whole
block are checked against everything, and a branch against the whole block's statements (the
barrier then goes before the branch, where every thread passes).

Device intrinsics are read through their declared effects (ir/intrinsics), never their names: a
pointer operand declared as written (or updated atomically) in shared memory is a write, one
declared as read a read; mbarrier operands are synchronisation objects, not data; and every
operand of an intrinsic whose effects a software pipeline orders itself (`pipeline_ordered`:
pipelined cp.async, TMA) is left out, the pipeline having placed its own waits and barriers.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Evaluate, For, If, Kernel, Load, Ref, Store, Sync, WarpSpecialize, While, collect, seq
from ..ir import stmts_of as _stmts   # nested sequences spliced in: a tile op's code is a Seq inside the body
from ..ir.func import PrimFunc
from ..ir.hopper import WarpGroupScope
from ..ir.intrinsics import ATOMIC, BARRIER, PTR, READ_WRITE, WRITE, IntrinsicCall
from ..ir.uniformity import Uniformity


def _access(stmt) -> tuple[set, set]:
    """Shared buffers `stmt` reads and writes (module docstring: how intrinsics count)."""
    reads, writes = set(), set()
    skip = set()
    found = collect(stmt, lambda n: isinstance(n, (IntrinsicCall, Load, Store, Ref)))   # one walk for both kinds
    for c in found:
        if not isinstance(c, IntrinsicCall):
            continue
        if c.intrinsic.effects.pipeline_ordered:
            skip |= {id(a) for a in c.args}
            continue
        for decl, a in c.operand_args():
            if not isinstance(a, Ref) or decl is None:
                continue  # an undeclared pointer counts as a read below
            if decl.kind == BARRIER:
                skip.add(id(a))
            elif decl.kind == PTR and decl.access in (WRITE, ATOMIC, READ_WRITE):
                if a.buffer.scope == "shared":
                    writes.add(a.buffer)
                    if decl.access == READ_WRITE:
                        reads.add(a.buffer)
                skip.add(id(a))
    for n in found:
        if isinstance(n, IntrinsicCall) or n.buffer.scope != "shared" or id(n) in skip:
            continue
        (writes if isinstance(n, Store) else reads).add(n.buffer)
    return reads, writes


class _Overlap:
    """Whether two sets of shared buffers share any byte (buffers may reuse each other's memory):
    the byte ranges plan_shared_memory gave them, buffer -> (first byte, end byte)."""

    def __init__(self, ranges: dict):
        self.ranges = ranges

    def __call__(self, xs, ys) -> bool:
        if xs & ys:
            return True
        for x in xs:
            rx = self.ranges.get(x)
            if rx is None:
                continue
            for y in ys:
                ry = self.ranges.get(y)
                if ry is not None and rx[0] < ry[1] and ry[0] < rx[1]:
                    return True
        return False


class _State:
    """Shared buffers accessed since the last barrier: by the whole block, and (`scoped_*`) inside
    T.ws branches, which only statements of the whole block are checked against: branches order
    each other with the program's own mbarriers."""

    def __init__(self, overlap: _Overlap):
        self.overlap = overlap
        self.reads: set = set()
        self.writes: set = set()
        self.scoped_reads: set = set()
        self.scoped_writes: set = set()
        self.branches: set = set()   # warp groups of the branches that touched shared memory

    def fresh(self) -> "_State":
        return _State(self.overlap)

    def conflicts(self, r, w, waw: bool = True) -> bool:
        ov = self.overlap
        return (self.conflicts_outside(r, w, waw) or ov(r, self.scoped_writes)
                or (waw and ov(w, self.scoped_writes)) or ov(w, self.scoped_reads))

    def conflicts_outside(self, r, w, waw: bool = True) -> bool:
        ov = self.overlap
        return ov(r, self.writes) or (waw and ov(w, self.writes)) or ov(w, self.reads)

    def add(self, r, w):
        self.reads |= r
        self.writes |= w

    def add_scoped(self, r, w):
        self.scoped_reads |= r
        self.scoped_writes |= w

    def copy(self) -> "_State":
        other = self.fresh()
        other.reads, other.writes = set(self.reads), set(self.writes)
        other.scoped_reads, other.scoped_writes = set(self.scoped_reads), set(self.scoped_writes)
        other.branches = set(self.branches)
        return other

    def merge(self, other: "_State") -> None:
        """What either of two paths (an if's branches) left since their last barriers."""
        self.reads |= other.reads
        self.writes |= other.writes
        self.scoped_reads |= other.scoped_reads
        self.scoped_writes |= other.scoped_writes
        self.branches |= other.branches

    def empty(self) -> bool:
        return not (self.reads or self.writes or self.scoped_reads or self.scoped_writes)

    def clear(self):
        self.reads, self.writes = set(), set()
        self.scoped_reads, self.scoped_writes = set(), set()
        self.branches = set()


class _Syncs:
    """The barriers of one kernel: `block` walks a statement list, each kind of statement handled by
    its own method (`_STMT`), the kernel's thread-varying values in `uniformity`."""

    def __init__(self, kernel: Kernel, overlap: _Overlap):
        self.uniformity = Uniformity(kernel)
        self.overlap = overlap

    def block(self, stmts, state: _State, in_loop: bool = False) -> list:
        out = []
        for i, s in enumerate(stmts):
            handler = _STMT.get(type(s), _Syncs._plain)
            handler(self, s, stmts, i, state, in_loop, out)
        return out

    def _sync(self, s, stmts, i, state, in_loop, out):
        state.clear()
        out.append(s)

    def _loop(self, s, stmts, i, state, in_loop, out):
        if not collect(s.body, lambda n: isinstance(n, (Load, Store, Ref))):
            return self._plain(s, stmts, i, state, in_loop, out)
        r, w = _access(s)
        if state.conflicts(r, w):
            out.append(Sync())
            state.clear()
        inner = state.fresh()
        body = self.block(_stmts(s.body), inner, True)
        # loop-carried: what the end of an iteration did vs what the start of the next does.
        # Lowering's per-thread element loops (unrolled, or marked "once") write each element
        # once, from one thread: write-after-write between their iterations is not a race.
        first_r, first_w, branch = _prefix_access(body)
        if isinstance(s, While):  # the condition is read again before the next iteration
            first_r, branch = first_r | _access(Evaluate(s.cond))[0], False
        once = isinstance(s, For) and (s.kind == "unroll" or s.annotation("once", False))
        check = inner.conflicts_outside if branch else inner.conflicts
        if check(first_r, first_w, waw=not once) and not inner.empty():
            body.append(Sync())
            inner.clear()
        state.add(r, w)
        if isinstance(s, While):
            out.append(While(s.cond, seq(*body), span=s.span))
        else:
            out.append(For(s.var, s.start, s.extent, s.kind, seq(*body), s.step, s.annotations, span=s.span))

    def _warp_specialize(self, s, stmts, i, state, in_loop, out):
        # the producer only issues TMA loads, ordered by mbarriers; the consumer's statements
        # need barriers among themselves (printed as barriers of the consumer threads)
        body = self.block(_stmts(s.consumer), state, in_loop)
        out.append(replace(s, consumer=seq(*body)))

    def _branch(self, s, stmts, i, state, in_loop, out):
        # a T.ws branch: barriers inside are its threads' own (printed as a named barrier); one
        # first when the same warp groups may have used shared memory since the last block
        # barrier (an earlier branch of theirs, the previous iteration of a loop), so that use
        # is over before this branch writes or reads
        # A block barrier goes before the first of consecutive branches, never between two:
        # warp groups that each run their whole role in a branch (waiting on mbarriers the
        # others fill) would never all reach one placed between them.
        run = stmts[i:]
        run = run[:next((j for j, x in enumerate(run) if not isinstance(x, WarpGroupScope)), len(run))]
        if i == 0 or not isinstance(stmts[i - 1], WarpGroupScope):
            rr, ww = set(), set()
            for x in run:
                xr, xw = _access(x)
                rr, ww = rr | xr, ww | xw
            if state.conflicts_outside(rr, ww):
                out.append(Sync())
                state.clear()
        r, w = _access(s)
        body = self.block(_stmts(s.body), state.fresh())
        if (r or w) and (in_loop or s.key in state.branches):
            body = [Sync()] + body
        state.add_scoped(r, w)
        if r or w:
            state.branches.add(s.key)
        out.append(replace(s, body=seq(*body)))

    def _if(self, s, stmts, i, state, in_loop, out):
        if self.uniformity.varies(s.cond):
            # a per-thread condition: a barrier inside would be skipped by some threads, so the
            # whole statement is one access, ordered by barriers before and after it
            return self._plain(s, stmts, i, state, in_loop, out, always=True)
        # every thread takes the same branch (ir/uniformity.py): barriers go inside it, where
        # its statements need them; after it, what either branch left unsynchronised
        r, _ = _access(Evaluate(s.cond))
        if (r and state.conflicts(r, set())) or _starts_with_sync(self.block(_stmts(s.then), state.copy(), in_loop)):
            # a barrier the branch would need first goes before the `if` (legal: every thread gets
            # there), so that the path that skips the branch leaves nothing unsynchronised either
            out.append(Sync())
            state.clear()
        state.add(r, set())
        other = state.copy()
        then = self.block(_stmts(s.then), state, in_loop)
        orelse = None if s.orelse is None else seq(*self.block(_stmts(s.orelse), other, in_loop))
        state.merge(other)
        out.append(If(s.cond, seq(*then), orelse, span=s.span))

    def _plain(self, s, stmts, i, state, in_loop, out, always: bool = False):
        r, w = _access(s)
        if (always or r or w) and state.conflicts(r, w):
            out.append(Sync())
            state.clear()
        state.add(r, w)
        out.append(s)


_STMT = {Sync: _Syncs._sync, For: _Syncs._loop, While: _Syncs._loop, WarpSpecialize: _Syncs._warp_specialize,
         WarpGroupScope: _Syncs._branch, If: _Syncs._if}


def _starts_with_sync(body: list) -> bool:
    return bool(body) and isinstance(body[0], Sync)


def _prefix_access(body: list):
    """(reads, writes, whether all in T.ws branches) of the statements a loop body runs before its
    first barrier: the next iteration's start, which the end of this one must not overlap (every
    one of them, not only the first: `copy A_s; copy B_s` at the top of a loop whose end reads
    B_s needs the barrier although A_s alone would not)."""
    reads, writes, branch = set(), set(), True
    for s in body:
        if isinstance(s, Sync):
            break
        r, w = _access(s)
        if r or w:
            reads, writes = reads | r, writes | w
            branch = branch and isinstance(s, WarpGroupScope)
    return reads, writes, branch and bool(reads or writes)


def insert_syncs(func: PrimFunc, ctx) -> PrimFunc:
    overlap = _Overlap({b: (off, off + b.nbytes) for b, off in func.lowering.smem_offsets.items()})

    def fix(k: Kernel):
        body = _Syncs(k, overlap).block(_stmts(k.body), _State(overlap))
        return replace(k, body=seq(*body))
    stmts = [fix(s) if isinstance(s, Kernel) else s for s in _stmts(func.body)]
    return func.with_body(seq(*stmts))

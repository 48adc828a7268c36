"""TileLang's manual Hopper constructs: `T.alloc_barrier`, `T.barrier_arrive` / `T.barrier_wait`,
`T.mbarrier_arrive` / `T.mbarrier_wait_parity`, `T.ws`, `T.set_max_nreg` and the register hints
(`T.disable_warp_group_reg_alloc`, `T.annotate_producer_reg_dealloc`,
`T.annotate_consumer_reg_alloc`).

Each builds the IR of ir/hopper.py (its docstring gives the meaning every target keeps).  With
TileLang's meaning: a barrier argument is one element of a `T.alloc_barrier` buffer (`bars[i]`) or
the buffer itself (its first mbarrier); `T.barrier_wait(b, parity)` is `T.mbarrier_wait_parity`;
`T.annotate_producer_reg_dealloc(n=24)` / `T.annotate_consumer_reg_alloc(n=240)` are
`T.set_max_nreg(n, 0)` / `T.set_max_nreg(n, 1)`; `T.disable_warp_group_reg_alloc()` stops the
compiler's own warp specialization from moving registers (it is `T.no_set_max_nreg()`).
"""
from __future__ import annotations

from ..ir import Alloc, Annotate, AnnotationKey, Buffer, Expr, Load, Ref, as_expr, dtype as dt
from ..ir.hopper import BarrierArrive, BarrierInit, BarrierWait, SetMaxNreg, WarpGroupScope
from .builder import error, require_kernel

MAX_ARRIVALS = (1 << 20) - 1  # the CPU simulation's field width (tilecraft_cpu.h); the hardware allows 2^20 - 1 too


def alloc_barrier(arrive_count):
    """Shared-memory mbarriers, set up once (by one thread, then a barrier of the block) before the
    next statement: `arrive_count` an int (one mbarrier) or a list (one per entry), each the number
    of thread arrivals that complete a phase.  Returns the buffer; index it for one mbarrier."""
    b = require_kernel("T.alloc_barrier")
    counts = list(arrive_count) if isinstance(arrive_count, (list, tuple)) else [arrive_count]
    if not counts:
        raise error("T.alloc_barrier: the list of arrive counts is empty; give one count per mbarrier")
    for c in counts:
        if isinstance(c, bool) or not isinstance(c, int) or not 0 < c <= MAX_ARRIVALS:
            raise error(f"T.alloc_barrier: each arrive count must be a compile-time int in 1..{MAX_ARRIVALS} "
                        f"(thread arrivals per phase), got {c!r}")
    name = b.fresh_name(getattr(b, "pending_name", None) or "mbar")
    buf = Buffer(name, (len(counts),), dt.dtype("uint64"), "shared", span=b.span)
    b.emit(Alloc(buf, span=b.span))
    b.emit(BarrierInit(buf, tuple(counts), span=b.span))
    return buf


def _barrier_ref(what, bar) -> Ref:
    if isinstance(bar, Buffer):
        _check_barrier_buffer(what, bar)
        return Ref(bar, (as_expr(0),))
    if isinstance(bar, Load):
        _check_barrier_buffer(what, bar.buffer)
        return Ref(bar.buffer, bar.indices)
    if isinstance(bar, (int, Expr)):
        raise error(f"{what}: barrier ids are not supported; pass an mbarrier of a T.alloc_barrier buffer "
                    f"(`bars[i]`) or the buffer itself (its first mbarrier), got {bar!r}")
    raise error(f"{what}: expected an mbarrier from T.alloc_barrier, got {type(bar).__name__} {bar!r}")


def _check_barrier_buffer(what, buf: Buffer):
    if buf.scope != "shared" or buf.dtype.name != "uint64":
        raise error(f"{what}: {buf.name} is a {buf.scope} {buf.dtype} buffer, not mbarriers; make them with "
                    f"T.alloc_barrier(arrive_count)")


def barrier_arrive(barrier_id):
    """Each thread that runs this arrives once on the mbarrier."""
    b = require_kernel("T.barrier_arrive")
    b.emit(BarrierArrive(_barrier_ref("T.barrier_arrive", barrier_id), span=b.span))


def barrier_wait(barrier_id, parity=None):
    """Wait until the mbarrier's phase with parity `parity` (0 or 1) has completed."""
    b = require_kernel("T.barrier_wait")
    if parity is None:
        raise error("T.barrier_wait(barrier, parity): the parity (0 or 1) of the phase to wait for is missing")
    ref = _barrier_ref("T.barrier_wait", barrier_id)
    if isinstance(parity, bool) or (isinstance(parity, int) and parity not in (0, 1)):
        raise error(f"T.barrier_wait: parity must be 0 or 1, got {parity!r}")
    b.emit(BarrierWait(ref, as_expr(parity, dt.int32), span=b.span))


def mbarrier_arrive(mbarrier, cta_id=None):
    """`T.mbarrier_arrive(bars[i])`: the same as T.barrier_arrive.  `cta_id`: arrive on that block of the
    cluster's mbarrier instead (language/cluster.py), not supported yet."""
    b = require_kernel("T.mbarrier_arrive")
    if cta_id is not None:
        raise error("T.mbarrier_arrive(bar, cta_id): an arrival on another block's mbarrier of the cluster (a "
                    "remote arrival) is not supported by tilecraft yet: the CPU target runs a cluster's blocks "
                    "one after another",
                    hint="arrive on this block's own mbarrier: T.mbarrier_arrive(bar)")
    b.emit(BarrierArrive(_barrier_ref("T.mbarrier_arrive", mbarrier), span=b.span))


def cp_async_barrier_noinc(barrier_id):
    """`T.cp_async_barrier_noinc(bar)`: this thread arrives on `bar` once its earlier asynchronous
    copies have landed (PTX cp.async.mbarrier.arrive.noinc: the arrival counts toward the expected
    ones).  tilecraft's copies and element stores have landed when the next statement starts, so
    this is the thread's arrival now: T.barrier_arrive."""
    b = require_kernel("T.cp_async_barrier_noinc")
    b.emit(BarrierArrive(_barrier_ref("T.cp_async_barrier_noinc", barrier_id), span=b.span))


def mbarrier_wait_parity(mbarrier, parity):
    """`T.mbarrier_wait_parity(bars[i], parity)`: the same as T.barrier_wait."""
    b = require_kernel("T.mbarrier_wait_parity")
    ref = _barrier_ref("T.mbarrier_wait_parity", mbarrier)
    if isinstance(parity, bool) or (isinstance(parity, int) and parity not in (0, 1)):
        raise error(f"T.mbarrier_wait_parity: parity must be 0 or 1, got {parity!r}")
    b.emit(BarrierWait(ref, as_expr(parity, dt.int32), span=b.span))


class WarpGroups:
    """`with T.ws(0):` / `with T.ws(0, 1):` -- the body runs on those warp groups (flat thread
    index // 128) only.  The parser calls `build_scope` with the parsed body."""

    def __init__(self, groups, span):
        self.groups, self.span = groups, span

    def build_scope(self, body):
        return WarpGroupScope(self.groups, body, span=self.span)


def ws(*warp_group_idx):
    b = require_kernel("T.ws")
    groups = []
    for g in warp_group_idx:
        for x in (g if isinstance(g, (list, tuple)) else [g]):
            if isinstance(x, bool) or not isinstance(x, int) or x < 0:
                raise error(f"T.ws: warp group ids must be compile-time ints >= 0, got {x!r}")
            groups.append(x)
    if not groups:
        raise error("T.ws(): name at least one warp group (thread index // 128)")
    return WarpGroups(tuple(sorted(set(groups))), b.span)


def _regs(what, reg_count):
    if isinstance(reg_count, bool) or not isinstance(reg_count, int) or not 24 <= reg_count <= 256 or reg_count % 8:
        raise error(f"{what}: the register count must be a compile-time multiple of 8 in 24..256 "
                    f"(setmaxnreg), got {reg_count!r}")
    return reg_count


def set_max_nreg(reg_count, is_inc):
    """This warp group's per-thread register budget becomes `reg_count` (`is_inc` 1: raise it, 0:
    lower it); sm_90a only, a warning elsewhere (results never change)."""
    b = require_kernel("T.set_max_nreg")
    if isinstance(is_inc, bool):
        is_inc = int(is_inc)
    if is_inc not in (0, 1):
        raise error(f"T.set_max_nreg: is_inc must be 0 (lower the budget) or 1 (raise it), got {is_inc!r}")
    b.emit(SetMaxNreg(_regs("T.set_max_nreg", reg_count), bool(is_inc), span=b.span))


def annotate_producer_reg_dealloc(reg_count=24):
    set_max_nreg(_regs("T.annotate_producer_reg_dealloc", reg_count), 0)


def annotate_consumer_reg_alloc(reg_count=240):
    set_max_nreg(_regs("T.annotate_consumer_reg_alloc", reg_count), 1)


def disable_warp_group_reg_alloc():
    """The compiler's own warp specialization keeps every role's register budget as launched."""
    b = require_kernel("T.disable_warp_group_reg_alloc")
    b.emit(Annotate(AnnotationKey.NO_SET_MAX_NREG, True, span=b.span))

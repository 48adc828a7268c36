"""TileLang's manual Hopper constructs: `T.alloc_barrier`, `T.barrier_arrive` / `T.barrier_wait`,
`T.mbarrier_arrive` / `T.mbarrier_wait_parity`, `T.ws`, `T.set_max_nreg` and the register hints
(`T.disable_warp_group_reg_alloc`, `T.annotate_producer_reg_dealloc`,
`T.annotate_consumer_reg_alloc`), and the copies and gemms such programs issue by hand: `T.tma_copy`,
`T.wgmma_gemm`, `T.wait_wgmma`.

Each builds the IR of ir/hopper.py (its docstring gives the meaning every target keeps).  With
TileLang's meaning: a barrier argument is one element of a `T.alloc_barrier` buffer (`bars[i]`) or
the buffer itself (its first mbarrier); `T.barrier_wait(b, parity)` is `T.mbarrier_wait_parity`;
`T.annotate_producer_reg_dealloc(n=24)` / `T.annotate_consumer_reg_alloc(n=240)` are
`T.set_max_nreg(n, 0)` / `T.set_max_nreg(n, 1)`; `T.disable_warp_group_reg_alloc()` stops the
compiler's own warp specialization from moving registers (it is `T.no_set_max_nreg()`).
"""
from __future__ import annotations

from ..ir import Alloc, Annotate, AnnotationKey, Buffer, Expr, Load, Ref, as_expr, dtype as dt
from ..ir.hopper import BarrierArrive, BarrierInit, BarrierWait, SetMaxNreg, TmaCopy, WarpGroupScope
from ..ir.tileop import Copy
from .builder import error, require_kernel, warn_once

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
    """`T.mbarrier_arrive(bars[i])`: the same as T.barrier_arrive.  `T.mbarrier_arrive(bars[i], cta_id)`:
    each thread that runs it arrives on the mbarrier at the same shared-memory offset in block `cta_id`
    (its rank, T.block_rank_in_cluster) of this block's cluster -- a remote arrival (TileLang: PTX
    mapa.shared::cluster + mbarrier.arrive.release.cluster).  Outside a T.ClusterKernel a block is a
    cluster of one: cta_id 0 is its own mbarrier."""
    b = require_kernel("T.mbarrier_arrive")
    ref = _barrier_ref("T.mbarrier_arrive", mbarrier)
    if cta_id is None:
        b.emit(BarrierArrive(ref, span=b.span))
        return
    dims = b.kernel.spec.cluster or (1, 1, 1)
    size = dims[0] * dims[1] * dims[2]
    if isinstance(cta_id, bool) or not isinstance(cta_id, (int, Expr)):
        raise error(f"T.mbarrier_arrive(bar, cta_id): cta_id must be an int or an integer expression (a block's "
                    f"rank in the cluster), got {cta_id!r}")
    if isinstance(cta_id, int) and not 0 <= cta_id < size:
        what = (f"the cluster's blocks are ranked 0..{size - 1} (T.ClusterKernel cluster_dims={dims})" if size > 1
                else "outside a T.ClusterKernel a block is a cluster of one: its rank is 0")
        raise error(f"T.mbarrier_arrive(bar, cta_id={cta_id}): no block of rank {cta_id} in this cluster; {what}")
    cta = as_expr(cta_id, dt.int32)
    if not cta.dtype.is_int:
        raise error(f"T.mbarrier_arrive(bar, cta_id): cta_id must be an integer, got a {cta.dtype} expression")
    if size == 1:
        if isinstance(cta_id, int):   # rank 0 of a cluster of one: this block's own mbarrier
            b.emit(BarrierArrive(ref, span=b.span))
            return
        raise error("T.mbarrier_arrive(bar, cta_id): an arrival on another block's mbarrier needs a thread-block "
                    "cluster; this kernel is not a T.ClusterKernel, so every block is a cluster of one",
                    hint="with T.ClusterKernel(..., cluster_dims=2): the blocks whose mbarriers are arrived on")
    b.emit(BarrierArrive(ref, cta, span=b.span))


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


# ---- copies and gemms issued by hand ------------------------------------------------------------

def tma_copy(src, dst, *, barrier=None, cluster_mask=None, leader_scope_threads=None, eviction_policy=None,
             annotations=None):
    """`T.tma_copy(src, dst, barrier=bar)`: load a region of a global tensor into a shared tile, its
    bytes a transaction on the mbarrier `bar` (TileLang: expect_tx + the TMA load, no arrival and no
    wait; the program arrives with T.barrier_arrive and waits with T.mbarrier_wait_parity).  Meaning
    on every target: ir/hopper.py `TmaCopy`.  A store (shared -> global, no barrier) is TileLang's
    tma_store without its wait: here it has landed when the statement ends, so a later
    T.tma_store_wait has nothing left to wait for.  `leader_scope_threads` and `eviction_policy`
    choose which thread issues the load and its cache hint: results do not change."""
    b = require_kernel("T.tma_copy")
    if annotations is not None and not isinstance(annotations, dict):
        raise error(f"T.tma_copy: annotations must be a dict, got {annotations!r}")
    ann = dict(annotations or {})
    barrier = ann.pop("barrier", barrier)
    cluster_mask = ann.pop("cluster_mask", cluster_mask)
    leader_scope_threads = ann.pop("leader_scope_threads", leader_scope_threads)
    eviction_policy = ann.pop("eviction_policy", eviction_policy)
    for key in ann:
        warn_once(("T.tma_copy", "annotations", key), f"T.tma_copy(annotations={{{key!r}: ...}}) is ignored: a "
                                                      f"lowering hint tilecraft does not use; results do not change")
    if cluster_mask is not None:
        raise error("T.tma_copy(..., cluster_mask=...): a multicast to the CTAs of a thread-block cluster is not "
                    "supported by tilecraft yet (no cluster launches)", hint="drop cluster_mask: each CTA loads its own tile")
    if leader_scope_threads is not None and (isinstance(leader_scope_threads, bool)
                                             or not isinstance(leader_scope_threads, int)
                                             or leader_scope_threads <= 0 or leader_scope_threads % 32):
        raise error(f"T.tma_copy: leader_scope_threads must be a positive multiple of 32 (the threads of one "
                    f"leader election), got {leader_scope_threads!r}")
    if eviction_policy not in (None, 0, 1, 2, "evict_normal", "evict_first", "evict_last"):
        raise error(f"T.tma_copy: eviction_policy must be 'evict_normal', 'evict_first' or 'evict_last', "
                    f"got {eviction_policy!r}")
    from .tileops import resolve_pair
    s, d = resolve_pair(src, dst)
    if s.buffer.dtype is not d.buffer.dtype:
        raise error(f"T.tma_copy: {s.buffer.name} is {s.buffer.dtype} but {d.buffer.name} is {d.buffer.dtype}; "
                    f"TMA moves bytes and does not convert", hint="use T.copy for a copy that casts")
    scopes = (s.buffer.scope, d.buffer.scope)
    if scopes == ("shared", "global"):
        if barrier is not None:
            raise error("T.tma_copy: a store from shared to global memory takes no barrier (TileLang completes it "
                        "with T.tma_store_wait)")
        b.emit(Copy(s, d, span=b.span))
        return
    if scopes != ("global", "shared"):
        raise error(f"T.tma_copy: copies a global tensor into a shared tile (a load) or a shared tile into a global "
                    f"tensor (a store); got {s.buffer.scope} {s.buffer.name} -> {d.buffer.scope} {d.buffer.name}",
                    hint="use T.copy for other memories")
    if barrier is None:
        raise error("T.tma_copy: a load into shared memory needs barrier=bar, the mbarrier (T.alloc_barrier) its "
                    "bytes complete on and that the consumers wait on")
    ref = _barrier_ref("T.tma_copy", barrier)
    b.emit(TmaCopy(Copy(s, d, span=b.span), ref, span=b.span))


def tma_store_arrive():
    """Close this thread's group of TMA stores: T.tma_copy's stores have landed already."""
    require_kernel("T.tma_store_arrive")


def tma_store_wait(count=0):
    """Wait until at most `count` groups of TMA stores are pending: none are (T.tma_copy)."""
    require_kernel("T.tma_store_wait")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise error(f"T.tma_store_wait: the group count must be a compile-time int >= 0, got {count!r}")


WGMMA_NOTE = ("T.wgmma_gemm: issued as T.gemm (the gemm has completed when the statement ends, so each "
              "T.wait_wgmma(n) after it has nothing left to wait for)")


def wgmma_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=None, clear_accum=False, **hints):
    """`T.wgmma_gemm(A, B, C, ...)`: TileLang's explicit Hopper gemm with no implicit wait (the program
    calls T.wait_wgmma before it reads C or overwrites A / B).  Here it is T.gemm, which completes
    before the next statement: every wait the program placed is then already satisfied, so a program
    correct under the asynchronous meaning computes the same.  Its lowering is T.gemm's (wgmma on
    sm_90a where the gemm plan allows; `kernel.get_plan()` shows which).  TileLang's lowering switches
    (`emit_arrive`, `emit_commit`, `emit_fence_*`, `instruction_n`, ...) choose instructions only."""
    from .tileops import GemmWarpPolicy, gemm_stmt
    b = require_kernel("T.wgmma_gemm")
    known = {"emit_arrive", "emit_commit", "emit_fence_before", "emit_fence_after", "instruction_n", "logical_m",
             "logical_shape", "padding_value", "allow_padding"}
    for key in hints:
        if key not in known:
            raise error(f"T.wgmma_gemm: unknown argument {key}=", hint="the arguments are T.gemm's (A, B, C, "
                        "transpose_A, transpose_B, policy, clear_accum)")
        warn_once(("T.wgmma_gemm", key), f"T.wgmma_gemm({key}=...) is ignored: it chooses instructions, not what "
                                         f"is computed")
    b.emit(gemm_stmt(A, B, C, transpose_A, transpose_B, GemmWarpPolicy.Square if policy is None else policy,
                     clear_accum, op_name="T.wgmma_gemm", note=WGMMA_NOTE, wgmma_requested=True))


def wait_wgmma(count=0):
    """`T.wait_wgmma(n)`: wait until at most n wgmma groups are in flight.  T.gemm and T.wgmma_gemm
    complete before the next statement (their groups are never left in flight), so this is already
    true."""
    require_kernel("T.wait_wgmma")
    if isinstance(count, bool) or (isinstance(count, int) and count < 0):
        raise error(f"T.wait_wgmma: the group count must be >= 0, got {count!r}")

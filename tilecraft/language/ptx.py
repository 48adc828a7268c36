"""TileLang's PTX-level builtins: `T.ptx_cp_async` / `T.ptx_commit_group` / `T.ptx_wait_group`,
`T.fence_proxy_async`, `T.mbarrier_arrive_expect_tx`, `T.named_barrier_arrive`, and the warp votes
`T.any_sync` / `T.all_sync` / `T.ballot_sync` / `T.ballot`.

tilecraft's model of a kernel: a copy or element store has landed when the next statement starts
(the compiler's own pipelining overlaps them, with its own cp.async groups and barriers).  Within that
model:

- `T.ptx_cp_async(dst_ptr, src_ptr, n)` copies the n elements (consecutive along the last dimension)
  from `src_ptr` to `dst_ptr` in the thread that runs it, as ordinary loads and stores;
- `T.ptx_commit_group()` / `T.ptx_wait_group(n)` have nothing left to wait for, and emit nothing (an
  asynchronous group of our own in flight is not touched);
- `T.mbarrier_arrive_expect_tx(bar, bytes)` is this thread's arrival on `bar`: the bytes it announces
  come from copies that have already landed, so the phase completes on arrivals alone;
- `T.fence_proxy_async()` orders this thread's shared-memory writes before later async-proxy reads
  (wgmma, TMA) on sm_90a (fence.proxy.async.shared::cta); nothing to order on the CPU target.

`T.named_barrier_arrive` and the votes are thread-level: compiled for CUDA, refused on the CPU target
at their line (one CPU thread runs each statement over a whole tile).
"""
from __future__ import annotations

from ..ir import For, Load, Store, Var, as_expr, binary, cast, const
from ..ir import dtype as dt
from ..ir import intrinsics as I
from ..ir.stmt import Evaluate
from .builder import error, require_kernel
from .compat import index_to_coordinates
from .hopper import _barrier_ref
from .lowlevel import AccessPtr

_FULL = 0xFFFFFFFF


def _flat(buf, idx):
    flat = as_expr(0)
    for i, n in zip(idx, buf.shape):
        flat = binary("+", binary("*", flat, n), i)
    return flat


def ptx_cp_async(dst_access_ptr, src_access_ptr, num_elems, predicate=None):
    """dst[k] = src[k] for the `num_elems` elements after each pointer (row-major), in this thread."""
    b = require_kernel("T.ptx_cp_async")
    for p, what in ((dst_access_ptr, "destination"), (src_access_ptr, "source")):
        if not isinstance(p, AccessPtr):
            raise error(f"T.ptx_cp_async: the {what} is T.access_ptr(buf[...], ...), got {p!r}")
    if predicate is not None:
        raise error("T.ptx_cp_async(..., predicate=...) is not supported by tilecraft yet",
                    hint="guard the call with `if cond:` (elements it skips keep their values)")
    if isinstance(num_elems, bool) or not isinstance(num_elems, int) or num_elems <= 0:
        raise error(f"T.ptx_cp_async: the element count must be a positive compile-time int, got {num_elems!r}")
    dst, src = dst_access_ptr.ref, src_access_ptr.ref
    if dst.buffer.dtype.bits != src.buffer.dtype.bits:
        raise error(f"T.ptx_cp_async: {src.buffer.name} ({src.buffer.dtype}) and {dst.buffer.name} "
                    f"({dst.buffer.dtype}) have elements of different widths")
    nbytes = num_elems * dst.buffer.dtype.bytes
    if nbytes not in (4, 8, 16):
        raise error(f"T.ptx_cp_async: {num_elems} {dst.buffer.dtype} elements are {nbytes} bytes; cp.async moves "
                    f"4, 8 or 16 bytes")
    k = Var(b.fresh_name("cp_k"))
    d0, s0 = _flat(dst.buffer, dst.indices), _flat(src.buffer, src.indices)
    value = Load(src.buffer, tuple(index_to_coordinates(binary("+", s0, k), src.buffer.shape)))
    if src.buffer.dtype is not dst.buffer.dtype:
        value = cast(value, dst.buffer.dtype)
    body = Store(dst.buffer, tuple(index_to_coordinates(binary("+", d0, k), dst.buffer.shape)), value, span=b.span)
    b.emit(For(k, const(0), const(num_elems), "unroll", body, 1, (), span=b.span))


def ptx_commit_group():
    """Close this thread's group of asynchronous copies: they have landed already (module docstring)."""
    require_kernel("T.ptx_commit_group")


def ptx_wait_group(num=0):
    """Wait until at most `num` groups of this thread's asynchronous copies are in flight: none are."""
    require_kernel("T.ptx_wait_group")
    if isinstance(num, bool) or not isinstance(num, int) or num < 0:
        raise error(f"T.ptx_wait_group: the group count must be a compile-time int >= 0, got {num!r}")


def fence_proxy_async():
    b = require_kernel("T.fence_proxy_async")
    b.emit(I.evaluate(I.FenceProxyAsyncShared(), span=b.span))


def mbarrier_arrive_expect_tx(mbarrier, transaction_bytes):
    """This thread arrives on the mbarrier; the announced bytes have landed (module docstring)."""
    from ..ir.hopper import BarrierArrive
    b = require_kernel("T.mbarrier_arrive_expect_tx")
    ref = _barrier_ref("T.mbarrier_arrive_expect_tx", mbarrier)
    if isinstance(transaction_bytes, bool) or (isinstance(transaction_bytes, int) and transaction_bytes < 0):
        raise error(f"T.mbarrier_arrive_expect_tx: the byte count must be >= 0, got {transaction_bytes!r}")
    b.emit(BarrierArrive(ref, span=b.span))


def named_barrier_arrive(barrier_id, thread_count):
    """Arrive on hardware barrier `barrier_id` (1..15) without waiting; `thread_count` threads complete it."""
    b = require_kernel("T.named_barrier_arrive")
    block = 1
    for t in b.kernel.spec.threads:
        block *= t
    ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (barrier_id, thread_count))
    if not ok or not 1 <= barrier_id < 16 or thread_count <= 0 or thread_count % 32 or thread_count > block:
        raise error(f"T.named_barrier_arrive({barrier_id!r}, {thread_count!r}): the barrier id is an int in 1..15 "
                    f"(0 is the block's own barrier) and the count a compile-time multiple of 32 up to the block's "
                    f"{block} threads")
    b.emit(Evaluate(I.call(I.NamedBarrierArrive(barrier_id, thread_count)), span=b.span))


def _vote(kind, what, predicate, mask):
    b = require_kernel(what)
    threads = 1
    for t in b.kernel.spec.threads:
        threads *= t
    if threads % 32:
        raise error(f"{what}: the block has {threads} threads; a warp vote needs whole warps")
    if not (isinstance(mask, int) and mask == _FULL):
        raise error(f"{what}: only the full warp mask 0xFFFFFFFF is supported (every lane votes), got {mask!r}")
    p = cast(as_expr(predicate), dt.bool_)
    out = dt.uint32 if kind == "ballot" else dt.int32
    return I.call(I.WarpVote(kind), p, dtype=out)


def any_sync(predicate, mask=_FULL):
    """Nonzero (int32) in every lane when the predicate holds in any lane of the warp."""
    return _vote("any", "T.any_sync", predicate, mask)


def all_sync(predicate, mask=_FULL):
    """Nonzero (int32) in every lane when the predicate holds in all lanes of the warp."""
    return _vote("all", "T.all_sync", predicate, mask)


def ballot_sync(predicate, mask=_FULL):
    """The mask of the warp's lanes where the predicate holds (bit n: lane n), as uint64."""
    return cast(_vote("ballot", "T.ballot_sync", predicate, mask), dt.uint64)


def ballot(predicate):
    return cast(_vote("ballot", "T.ballot", predicate, _FULL), dt.uint64)

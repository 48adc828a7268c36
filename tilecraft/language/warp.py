"""TileLang's warp-level builtins: lane and warp indices, shuffles, warp reductions, `T.sync_warp`.

Thread-level code, as in TileLang: each thread evaluates them with its own values.  The CUDA targets
compile them (device/include/tilecraft/reduce.h); the CPU target runs them with the block's threads
emulated (transform/cpu_threads.py, one fiber per thread: all lanes reach a shuffle, then exchange).  The
shuffles use the full mask, so all 32 lanes of the warp must reach them together (never under a
branch that splits a warp).

    lane = T.get_lane_idx()                     # tid % 32;  T.get_warp_idx(): tid // 32
    v = T.shfl_xor(x, 1)                        # lane ^ 1's x;  shfl_down / shfl_up / shfl_sync
    s = T.warp_reduce_sum(x)                    # every lane: the warp's sum (max, min, bitand, bitor, bitxor)
"""
from __future__ import annotations

from ..ir import as_expr, binary, cast, const
from ..ir import dtype as dt
from ..ir import intrinsics as I
from ..ir.stmt import Evaluate
from .builder import error, require_kernel


def _tid(what):
    """The block-linear thread index `x + X * (y + Y * z)`."""
    b = require_kernel(what)
    tx, ty, tz = (tuple(b.kernel.spec.threads) + (1, 1))[:3]
    v = [b.kernel.thread_var(d) for d in range(3)]
    t = v[0]
    if ty > 1 or tz > 1:
        t = binary("+", t, binary("*", v[1], tx))
    if tz > 1:
        t = binary("+", t, binary("*", v[2], tx * ty))
    return b, t, tx * ty * tz


def _int(x, what):
    if not isinstance(x, int) or isinstance(x, bool) or x <= 0:
        raise error(f"{what} must be a positive compile-time int, got {x!r}")
    return x


def get_lane_idx(warp_size: int = 32):
    _, t, _ = _tid("T.get_lane_idx")
    return binary("%", t, _int(warp_size, "T.get_lane_idx(warp_size)"))


def get_warp_idx(warp_size: int = 32):
    _, t, _ = _tid("T.get_warp_idx")
    return binary("//", t, _int(warp_size, "T.get_warp_idx(warp_size)"))


get_warp_idx_sync = get_warp_idx  # the same value; TileLang's promise that it is warp-uniform holds


def get_warp_group_idx(warp_size: int = 32, warps_per_group: int = 4):
    _, t, _ = _tid("T.get_warp_group_idx")
    return binary("//", t, _int(warp_size, "warp_size") * _int(warps_per_group, "warps_per_group"))


def _shfl(kind, what, value, lane, width):
    b, _, threads = _tid(what)
    if threads % 32:
        raise error(f"{what}: the block has {threads} threads; shuffles need whole warps (a multiple of 32)")
    w = _int(width, f"{what}(..., width)")
    if w > 32 or w & (w - 1):
        raise error(f"{what}: width is a power of two up to 32, got {w}")
    v = as_expr(value)
    if v.dtype.bits > 64 or v.dtype.is_bool or v.dtype.bits < 16:
        raise error(f"{what}: shuffles move 16-, 32- or 64-bit values, got {v.dtype}",
                    hint="cast 8-bit values to int32 first")
    return I.call(I.Shfl(kind), v, cast(as_expr(lane), dt.int32), const(w), dtype=v.dtype)


def shfl_xor(value, lane_mask, width: int = 32):
    return _shfl("xor", "T.shfl_xor", value, lane_mask, width)


def shfl_down(value, delta, width: int = 32):
    return _shfl("down", "T.shfl_down", value, delta, width)


def shfl_up(value, delta, width: int = 32):
    return _shfl("up", "T.shfl_up", value, delta, width)


def shfl_sync(value, src_lane, width: int = 32):
    return _shfl("idx", "T.shfl_sync", value, src_lane, width)


def sync_warp():
    b, _, _ = _tid("T.sync_warp")
    b.emit(Evaluate(I.call(I.SyncWarp()), span=b.span))


def _warp_reduce(op, what, value):
    b, _, threads = _tid(what)
    if threads % 32:
        raise error(f"{what}: the block has {threads} threads; a warp reduction needs whole warps")
    v = as_expr(value)
    if op.startswith("bit") and not v.dtype.is_int:
        raise error(f"{what}: a bitwise reduction takes an integer value, got {v.dtype}")
    return I.call(I.ShflXorReduce(op, (1, 2, 4, 8, 16)), v, dtype=v.dtype)


def _reducer(op):
    def reduce(value):
        return _warp_reduce(op, f"T.warp_reduce_{op}", value)
    reduce.__name__ = reduce.__qualname__ = f"warp_reduce_{op}"
    reduce.__doc__ = f"`T.warp_reduce_{op}(x)`: every lane gets the {op} of x over its warp."
    return reduce


warp_reduce_sum, warp_reduce_max, warp_reduce_min = _reducer("sum"), _reducer("max"), _reducer("min")
warp_reduce_bitand, warp_reduce_bitor, warp_reduce_bitxor = _reducer("bitand"), _reducer("bitor"), _reducer("bitxor")

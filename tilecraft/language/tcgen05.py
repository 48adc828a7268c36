"""TileLang's tensor memory and tcgen05 MMA (Blackwell, sm_100): `T.alloc_tmem`, `T.tcgen05_gemm`,
`T.tcgen05_mma_arrive` and the tcgen05 fences.  The IR and its meaning are in ir/blackwell.py.

These have exact semantics that need no Blackwell hardware: tensor memory is per-block storage; a
tcgen05 gemm computes `C += op(A) @ op(B)` (float32 accumulation, as T.gemm) and, when it names an
mbarrier, arrives on it once (its commit) when the product is complete; `T.tcgen05_mma_arrive(bar)`
is that commit alone.  The CPU target executes them; tilecraft's CUDA backend has no tcgen05
lowering, so every CUDA target refuses them at the user's line naming sm_100
(transform/validate/arch.py) -- each call records an `ArchNeed` for that.
"""
from __future__ import annotations

import weakref

from ..ir import Alloc, Annotate, AnnotationKey, Buffer, Expr, Fill, If, as_expr, cast, dtype as dt
from ..ir.blackwell import ArchNeed, MmaCommitArrive
from .builder import error, require_kernel
from .hopper import _barrier_ref
from .kernel import _dtype, _shape
from .tileops import _ignored_options, gemm_op
from .types import GemmWarpPolicy

SM100 = 100
TMEM_COLUMNS = 512   # columns of 32-bit cells per SM (PTX tcgen05.alloc); 128 lanes each
TMEM_LANES = 128


def _need(construct: str, what: str) -> None:
    b = require_kernel(construct)
    b.emit(Annotate(AnnotationKey.REQUIRES_ARCH, ArchNeed(construct, what, SM100), span=b.span))


def alloc_tmem(shape, dtype):
    """A (rows, cols) tile in tensor memory -- or (stages, ..., rows, cols), that many such tiles side by
    side -- one per block, written by tcgen05 gemms and copies, read by copies (T.copy(tmem, fragment)
    is tcgen05.ld).  Rows are TMEM lanes (at most 128); the tiles take cols * bits / 32 of the 512
    32-bit columns each."""
    b = require_kernel("T.alloc_tmem")
    shp = _shape(shape, "T.alloc_tmem")
    d = _dtype(dtype, "T.alloc_tmem")
    if len(shp) < 2:
        raise error(f"T.alloc_tmem: tensor memory holds tiles of (lanes, columns), got shape {tuple(shp)}")
    rows, cols = shp[-2], shp[-1]
    for lead in shp[:-2]:   # (stages, lanes, columns): the stages side by side in the columns
        cols *= lead
    if rows > TMEM_LANES:
        raise error(f"T.alloc_tmem: {rows} rows exceed the {TMEM_LANES} lanes of tensor memory")
    words = -(-cols * d.bits // 32)
    if words > TMEM_COLUMNS:
        raise error(f"T.alloc_tmem: {tuple(shp)} of {d} takes {words} 32-bit columns; tensor memory has "
                    f"{TMEM_COLUMNS}")
    _need("T.alloc_tmem", "a tensor-memory allocation")
    name = b.fresh_name(getattr(b, "pending_name", None) or "tmem")
    buf = Buffer(name, shp, d, "shared", span=b.span)
    b.emit(Alloc(buf, span=b.span))
    _TMEM.add(buf)
    return buf


_TMEM = weakref.WeakSet()   # the buffers T.alloc_tmem made (scope "shared", ir/blackwell.py)


def is_tmem(x) -> bool:
    """Whether `x` (a buffer, or a region / element of one) lives in tensor memory."""
    buf = getattr(x, "buffer", x)
    try:
        return buf in _TMEM
    except TypeError:
        return False


def tcgen05_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square, clear_accum=False,
                 k_pack=1, wg_wait=0, *, mbar=None, use_2cta=False, annotations=None):
    """`C += op(A) @ op(B)` by the tcgen05 MMA: A from shared memory or tensor memory, B from shared
    memory, C in tensor memory (or a fragment).  `clear_accum` (a compile-time bool or a kernel
    condition such as `k == 0`): C = op(A) @ op(B) instead.  `mbar`: the mbarrier its commit arrives
    on, once, when the product is complete; read C only after waiting on it."""
    b = require_kernel("T.tcgen05_gemm")
    _ignored_options("T.tcgen05_gemm", k_pack=(k_pack, 1, "k_pack packs operands for AMD matrix cores"),
                     wg_wait=(wg_wait, 0, "a tcgen05 gemm completes through its mbarrier"),
                     annotations=(annotations or None, None, "its keys tune the lowering"))
    if use_2cta:
        raise error("T.tcgen05_gemm(use_2cta=True): the 2-CTA MMA (two blocks of a cluster sharing one product) "
                    "is not supported by tilecraft yet",
                    hint="use_2cta=False: each block computes its own tile")
    _need("T.tcgen05_gemm", "a tcgen05 MMA into tensor memory")
    dynamic_clear = isinstance(clear_accum, Expr)
    op = gemm_op(A, B, C, transpose_A, transpose_B, policy, False if dynamic_clear else clear_accum,
                 op_name="T.tcgen05_gemm", c_scopes=("shared", "fragment", "local"))
    if dynamic_clear:
        # the first MMA of the product does not accumulate: exactly C = 0 followed by C += A @ B
        c = op.c
        clear = Fill(c, cast(as_expr(0), c.buffer.dtype), span=b.span)
        b.emit(If(cast(clear_accum, dt.bool_), clear, None, span=b.span))
    b.emit(op)
    if mbar is not None:
        b.emit(MmaCommitArrive(_barrier_ref("T.tcgen05_gemm mbar", mbar), span=b.span))


def tcgen05_mma_arrive(mbar, *args, **kwargs):
    """One arrival on `mbar` once every tcgen05 gemm this block issued before it has completed
    (tcgen05.commit)."""
    b = require_kernel("T.tcgen05_mma_arrive")
    if args or kwargs:
        raise error("T.tcgen05_mma_arrive(mbar): the multicast form (a cluster mask) is not supported by "
                    "tilecraft yet")
    _need("T.tcgen05_mma_arrive", "an mbarrier arrival when tcgen05 MMAs complete")
    b.emit(MmaCommitArrive(_barrier_ref("T.tcgen05_mma_arrive", mbar), span=b.span))


def _fence(name):
    def fence():
        """A tcgen05 fence: orders tensor-memory accesses around a thread barrier.  tilecraft's tensor-
        memory accesses complete in statement order, so it orders nothing more on the CPU target."""
        _need(f"T.{name}", "a tcgen05 fence")
    fence.__name__ = fence.__qualname__ = name
    return fence


tcgen05_before_thread_sync = _fence("tcgen05_before_thread_sync")
tcgen05_after_thread_sync = _fence("tcgen05_after_thread_sync")

__all__ = ["alloc_tmem", "tcgen05_gemm", "tcgen05_mma_arrive", "tcgen05_before_thread_sync",
           "tcgen05_after_thread_sync"]

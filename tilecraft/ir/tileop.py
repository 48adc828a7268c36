"""Tile operations: statements that act on whole tiles (regions of buffers).

Each op knows which regions it reads and writes (`reads()` / `writes()`), which is all the
generic passes (bounds checks, pipelining, shared-memory planning) need.  How an op is lowered is
not here: each target registers a lowering per op class (`CPU_LOWERING` in
transform/lower_tile_ops_cpu.py, `CUDA_LOWERING` in transform/cuda_ops/), so adding an op never
grows an `isinstance` chain.
"""
from __future__ import annotations

from dataclasses import dataclass

from .buffer import Buffer, Region
from .expr import Expr
from .stmt import Stmt


@dataclass(frozen=True, eq=False)
class TileOp(Stmt):
    def reads(self) -> tuple:
        return ()

    def writes(self) -> tuple:
        return ()


@dataclass(frozen=True, eq=False)
class Copy(TileOp):
    """Element-wise move of `src` into `dst` (same element count); casts when dtypes differ.
    Parts of either region outside its buffer are skipped (reads give zero)."""
    src: Region
    dst: Region
    mode: str = "sync"  # "async": issued by a software pipeline, completed by its wait + barrier

    def reads(self):
        return (self.src,)

    def writes(self):
        return (self.dst,)


@dataclass(frozen=True, eq=False)
class Gemm(TileOp):
    """C += op(A) @ op(B) on whole tiles; A, B shared or fragment, C a fragment."""
    a: Region
    b: Region
    c: Region
    trans_a: bool = False
    trans_b: bool = False
    policy: str = "Square"
    clear_accum: bool = False
    # a software pipeline's per-tile synchronisation, as the callable object (an IntrinsicCall) that the
    # tensor-core gemm runs after its last k-step's operands are in registers and before that
    # step's mmas (set by transform/pipeline_copies.py; device/include/tilecraft/pipeline.h)
    pipeline_hook: object = None
    # wgmma groups left in flight when the gemm returns (a pipelined wgmma main loop: 1)
    async_groups: int = 0
    # A/B were filled by TMA and every thread has waited on their mbarrier: no proxy fence and no
    # barrier needed before the wgmmas (transform/pipeline_copies.py, the TMA loop form)
    tma_fed: bool = False
    # with async_groups on a wgmma gemm with A from registers: the local buffer that holds the packed A
    # fragments while the group is in flight (transform/pipelining/overlap.py)
    held: object = None
    # how it runs (ir/lowering.py GemmPlan: mma.sync warps, wgmma, wgmma with A from registers),
    # chosen by infer_layouts; None for the scalar fallback or before inference
    plan: object = None
    # a line for kernel.get_plan() saying what this gemm stands for (T.gemm_sp: language/sparse.py)
    note: str = ""
    # written as T.wgmma_gemm (language/hopper.py): TileLang runs it on wgmma, whose warps all lie along M;
    # where tilecraft runs it on mma.sync instead, the gemms of its thread context keep that warp arrangement
    # (transform/infer_layouts.py), so row vectors shared between their accumulators keep one layout
    wgmma_requested: bool = False

    @property
    def mnk(self) -> tuple:
        a = self.a.squeezed_shape()
        b = self.b.squeezed_shape()
        m, k = (a[1], a[0]) if self.trans_a else (a[0], a[1])
        n = b[0] if self.trans_b else b[1]
        return m, n, k

    def reads(self):
        return (self.a, self.b) + (() if self.clear_accum else (self.c,))

    def writes(self):
        return (self.c,)


@dataclass(frozen=True, eq=False)
class Fill(TileOp):
    dst: Region
    value: Expr

    def writes(self):
        return (self.dst,)


from .semantics import REDUCE_KINDS  # noqa: E402,F401  (one list: ir/semantics.py)


@dataclass(frozen=True, eq=False)
class Reduce(TileOp):
    """dst = reduce(src, dim); with clear=False the result is folded into dst's old values."""
    kind: str
    src: Buffer
    dst: Buffer
    dim: int
    clear: bool = True

    def reads(self):
        return (Region.whole(self.src),) + (() if self.clear else (Region.whole(self.dst),))

    def writes(self):
        return (Region.whole(self.dst),)


@dataclass(frozen=True, eq=False)
class AtomicAdd(TileOp):
    """dst[...] += value atomically; `value` is a Region (tile form) or a scalar Expr."""
    dst: Region
    value: object
    kind: str = "add"  # add, max, min

    def reads(self):
        return (self.value,) if isinstance(self.value, Region) else ()

    def writes(self):
        return (self.dst,)


@dataclass(frozen=True, eq=False)
class Cumsum(TileOp):
    src: Buffer
    dst: Buffer
    dim: int = 0
    reverse: bool = False

    def reads(self):
        return (Region.whole(self.src),)

    def writes(self):
        return (Region.whole(self.dst),)


@dataclass(frozen=True, eq=False)
class Print(TileOp):
    """Device-side print of a scalar expression or a whole buffer, prefixed by `msg`."""
    value: object  # Expr or Buffer
    msg: str = ""

    def reads(self):
        return (Region.whole(self.value),) if isinstance(self.value, Buffer) else ()

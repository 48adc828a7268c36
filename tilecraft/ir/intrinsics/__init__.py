"""Typed device intrinsics, one module per family of the header library
(device/include/tilecraft/*.h).  See base.py for the model; codegen/intrinsics_cuda.py for the
CUDA emitters, codegen/cpp.py for the CPU ones.

Adding an entry point: write its class in the family's module (a frozen dataclass whose fields are
the template parameters in the header's order; `entry`, `family`, `operands`, `effects`; a
`check()` that mirrors the header's static_asserts), export it here, and give it an emitter for
each target it runs on (the CUDA generic emitter prints `entry<params...>(args...)` unless a
specific one is registered).  Build calls with `call(intr, *args)` / `evaluate(intr, *args)`.
"""
from __future__ import annotations

from .. import dtype as dt
from ..stmt import Evaluate
from .atomic import ATOMICS, ORDERS, AtomicAdd, AtomicLoad, AtomicMax, AtomicMin, AtomicStore, atomic
from .base import (ATOMIC, BARRIER, CP_ASYNC, CP_ASYNC_GROUPS, DESC, EMITTERS, GENERIC_PROXY, HOOK, MBARRIER_PHASE, MSG,
                   PRED, PTR, READ, READ_WRITE, TMA, VALUE, WGMMA, WGMMA_GROUPS, WRITE, Effects, Intrinsic, IntrinsicCall,
                   IntrinsicError, Operand, emitter, register_emitter)
from .cpu_gemm import CpuGemm
from .cpu_reduce import CpuReduceRow
from .copy import CpAsyncCommit, CpAsyncPipelinedZfill, CpAsyncWait, CpAsyncWaitAll, CpAsyncZfill
from .debug import IKET_KINDS, DeviceAssert, IketEvent, Print, PrintElem
from .extern import ACCESS_MODES, Extern
from .mbarrier import (MbarArriveWarp, MbarInit, MbarInval, MbarWaitParity, PipeAcquire, PipeCommit, PipeInit,
                       PipeInval, PipelineBarrier, PipeRelease, PipeWait)
from .manual_sync import ClusterSync, CpuMbarArrive, CpuMbarWait, MbarArrive, MbarArriveCluster, MbarWaitParityCluster
from .mma import GemmRS, GemmRSLd, GemmSS, GemmSSLd, GemmSSS4
from .reduce import Shfl, ShflXorReduce, SyncWarp, WarpVote
from .regs import WarpgroupRegAlloc, WarpgroupRegDealloc
from .sync import ConsumerSync, FenceProxyAsyncShared, NamedBarrierArrive, NamedBarrierSync, WgTurnInit, WgTurnPass, WgTurnWait
from .random import RNG, RngInit, RngRand
from .tma import BulkCommit, BulkCommitWait, BulkReduceAdd, BulkReduceAddN, BulkWaitRead, TmaExpect, TmaLoadTile, TmaReduceAddTile
from .vector import VecConvert, VecLoadZfill, VecStore
from .wgmma import GemmRSSm90, GemmRSSm90Async, GemmSSSm90, WgmmaDrain, WgmmaHoldFence, WgmmaWait


def call(intr: Intrinsic, *args, dtype=dt.int32, span=None) -> IntrinsicCall:
    """The expression `intr(args...)`."""
    return IntrinsicCall(intr, tuple(args), dtype, span=span)


def evaluate(intr: Intrinsic, *args, span=None) -> Evaluate:
    """The statement `intr(args...);`."""
    return Evaluate(IntrinsicCall(intr, tuple(args)), span=span)


def all_intrinsics() -> list:
    """Every intrinsic class (for the emitter registry's completeness check)."""
    out, todo = [], list(Intrinsic.__subclasses__())
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c.__subclasses__())
    return sorted(out, key=lambda c: c.__name__)


__all__ = [n for n in dir() if not n.startswith("_")]

from ..printer import use_source_reprs as _use_source_reprs
_use_source_reprs(IntrinsicCall)

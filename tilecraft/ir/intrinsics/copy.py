"""cp.async (device/include/tilecraft/cp_async.h, vector.h): asynchronous global -> shared copies
of 4, 8 or 16 bytes, their commit groups and group waits."""
from __future__ import annotations

from dataclasses import dataclass

from .base import CP_ASYNC, CP_ASYNC_GROUPS, PRED, PTR, READ, WRITE, Effects, Intrinsic, Operand, require

_COPY_OPERANDS = (Operand("smem", PTR, WRITE, ("shared",)), Operand("gmem", PTR, READ, ("global",)),
                  Operand("pred", PRED, optional=True))


@dataclass(frozen=True)
class CpAsyncZfill(Intrinsic):
    """One cp.async of `nbytes` (zeros when the predicate is false), completed by the
    cp_async_commit + cp_async_wait_all that follow it in the same lowered copy."""
    entry = "tc::cp_async_zfill"
    family = "cp.async"
    operands = _COPY_OPERANDS
    effects = Effects(proxy=CP_ASYNC, zfill=True)
    nbytes: int

    def check(self):
        require(self.nbytes in (4, 8, 16), self, "cp.async moves 4, 8 or 16 bytes")


@dataclass(frozen=True)
class CpAsyncPipelinedZfill(Intrinsic):
    """A cp.async issued by a software pipeline (transform/pipeline_copies.py), which orders its
    completion with its own group waits or mbarriers and barriers."""
    entry = "tc::cp_async_pipelined_zfill"
    family = "cp.async"
    operands = _COPY_OPERANDS
    effects = Effects(proxy=CP_ASYNC, zfill=True, pipeline_ordered=True)
    nbytes: int

    def check(self):
        require(self.nbytes in (4, 8, 16), self, "cp.async moves 4, 8 or 16 bytes")


@dataclass(frozen=True)
class CpAsyncCommit(Intrinsic):
    """Close this thread's open cp.async group."""
    entry = "tc::cp_async_commit"
    family = "cp.async"
    effects = Effects(proxy=CP_ASYNC, commits=CP_ASYNC)


@dataclass(frozen=True)
class CpAsyncWait(Intrinsic):
    """Wait until at most `pending` of this thread's cp.async groups are in flight."""
    entry = "tc::cp_async_wait"
    family = "cp.async"
    effects = Effects(proxy=CP_ASYNC, waits=CP_ASYNC_GROUPS)
    pending: int

    def check(self):
        require(self.pending >= 0, self, "cp.async.wait_group takes a non-negative immediate")


@dataclass(frozen=True)
class CpAsyncWaitAll(Intrinsic):
    """Wait for every cp.async group of this thread."""
    entry = "tc::cp_async_wait_all"
    family = "cp.async"
    effects = Effects(proxy=CP_ASYNC, waits=CP_ASYNC_GROUPS)



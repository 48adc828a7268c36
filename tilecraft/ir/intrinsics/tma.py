"""TMA, the Hopper tensor-memory accelerator (device/include/tilecraft/tma.h): bulk tensor copies
from global to shared memory through the async proxy, counted on an mbarrier."""
from __future__ import annotations

from dataclasses import dataclass

from .base import ATOMIC, BARRIER, DESC, PTR, READ, TMA, VALUE, WRITE, Effects, Intrinsic, Operand, require


@dataclass(frozen=True)
class TmaExpect(Intrinsic):
    """This thread's arrival on `bar`, announcing `bytes` more bytes that TMA loads will deliver."""
    entry = "tc::tma_expect"
    family = "tma"
    operands = (Operand("bar", BARRIER), Operand("bytes", VALUE))
    effects = Effects(proxy=TMA, arrives=True, barrier="bar", pipeline_ordered=True, note="expect_tx: bytes to come")


@dataclass(frozen=True)
class TmaLoadTile(Intrinsic):
    """One TMA box of the tensor `desc` describes, at (col, row[, c2, c3, c4]) (coordinates innermost
    first, one per tensor dim, 2 to 5), into `base + offset` elements of a shared tile (a box of
    ir/layout/tma.py::sm90_tile_boxes); its bytes complete on `bar`."""
    entry = "tc::tma_load_tile"
    family = "tma"
    operands = (Operand("base", PTR, WRITE, ("shared",)), Operand("offset", VALUE), Operand("desc", DESC),
                Operand("bar", BARRIER), Operand("col", VALUE), Operand("row", VALUE), Operand("c2", VALUE),
                Operand("c3", VALUE), Operand("c4", VALUE))
    effects = Effects(proxy=TMA, arrives=True, barrier="bar", pipeline_ordered=True, note="complete_tx: bytes landed")


@dataclass(frozen=True)
class BulkReduceAdd(Intrinsic):
    """`bytes` contiguous bytes of a shared tile (one row) added element by element into global memory
    by the TMA unit (cp.reduce.async.bulk ... .add, sm_90; each element atomically in L2).  The shared
    bytes must be fenced (FenceProxyAsyncShared) and a block barrier passed before it; BulkCommitWait
    after it, before the tile is written again."""
    entry = "tc::bulk_reduce_add"
    family = "tma"
    operands = (Operand("dst", PTR, ATOMIC, ("global",)), Operand("src", PTR, READ, ("shared",)))
    effects = Effects(proxy=TMA, note="bulk reduce-add: shared -> global, element-wise atomic")
    bytes: int

    def check(self):
        require(self.bytes > 0 and self.bytes % 16 == 0, self, "bytes is a positive multiple of 16")


@dataclass(frozen=True)
class TmaReduceAddTile(Intrinsic):
    """One TMA box of a shared tile (`base + offset` elements, a box of ir/layout/tma.py::sm90_tile_boxes)
    added element by element into the tensor `desc` describes at (col, row[, c2, c3, c4]), innermost first
    (cp.reduce.async.bulk.tensor ... .add, sm_90; elements past the tensor are not added).  Fenced and
    waited for like BulkReduceAdd."""
    entry = "tc::tma_reduce_add_tile"
    family = "tma"
    operands = (Operand("base", PTR, READ, ("shared",)), Operand("offset", VALUE), Operand("desc", DESC),
                Operand("col", VALUE), Operand("row", VALUE), Operand("c2", VALUE), Operand("c3", VALUE),
                Operand("c4", VALUE))
    effects = Effects(proxy=TMA, note="tensor bulk reduce-add: shared -> global, element-wise atomic")


@dataclass(frozen=True)
class BulkReduceAddN(Intrinsic):
    """BulkReduceAdd of a whole tile that is one contiguous run in shared and in global memory: `bytes`
    (a runtime multiple of 16: the in-bounds rows of a ragged tile; nothing when <= 0) in one instruction."""
    entry = "tc::bulk_reduce_add_n"
    family = "tma"
    operands = (Operand("dst", PTR, ATOMIC, ("global",)), Operand("src", PTR, READ, ("shared",)),
                Operand("bytes", VALUE))
    effects = Effects(proxy=TMA, note="bulk reduce-add: shared -> global, element-wise atomic")


@dataclass(frozen=True)
class BulkCommitWait(Intrinsic):
    """Close this thread's bulk group and wait for its bulk reduces: until their shared bytes are read
    (`read_only`) or until they complete in global memory."""
    entry = "tc::bulk_commit_wait"
    family = "tma"
    effects = Effects(proxy=TMA, waits="bulk groups", note="cp.async.bulk.wait_group[.read] 0")
    read_only: bool


@dataclass(frozen=True)
class BulkCommit(Intrinsic):
    """Close this thread's bulk group of reduces reading `tile`; transform/place_bulk_waits.py puts a
    BulkWaitRead (and a block barrier) before the next write of `tile` and one before the block exits."""
    entry = "tc::bulk_commit"
    family = "tma"
    operands = (Operand("tile", PTR, READ, ("shared",)),)
    effects = Effects(proxy=TMA, commits="bulk groups", note="cp.async.bulk.commit_group; the wait is placed later")


@dataclass(frozen=True)
class BulkWaitRead(Intrinsic):
    """Wait until this thread's bulk groups have read their shared bytes (cp.async.bulk.wait_group.read 0).
    Its `tile` operand (the tile the reduces read) keeps that tile alive up to here for plan_shared_memory."""
    entry = "tc::bulk_wait_read"
    family = "tma"
    operands = (Operand("tile", PTR, READ, ("shared",)),)
    effects = Effects(proxy=TMA, waits="bulk groups", note="the tile may be written again")

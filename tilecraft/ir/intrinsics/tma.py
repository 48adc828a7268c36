"""TMA, the Hopper tensor-memory accelerator (device/include/tilecraft/tma.h): bulk tensor copies
from global to shared memory through the async proxy, counted on an mbarrier."""
from __future__ import annotations

from dataclasses import dataclass

from .base import BARRIER, DESC, PTR, TMA, VALUE, WRITE, Effects, Intrinsic, Operand


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

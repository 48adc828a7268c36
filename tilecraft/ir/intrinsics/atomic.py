"""Atomics on global or shared memory (device/include/tilecraft/atomic.h), overloaded by type."""
from __future__ import annotations

from dataclasses import dataclass

from .base import ATOMIC, PTR, READ, VALUE, WRITE, Intrinsic, Operand, require

_OPERANDS = (Operand("addr", PTR, ATOMIC, ("global", "shared")), Operand("value", VALUE))


@dataclass(frozen=True)
class AtomicAdd(Intrinsic):
    entry = "tc::atomic_add"
    family = "atomic"
    operands = _OPERANDS


@dataclass(frozen=True)
class AtomicMax(Intrinsic):
    entry = "tc::atomic_max"
    family = "atomic"
    operands = _OPERANDS


@dataclass(frozen=True)
class AtomicMin(Intrinsic):
    entry = "tc::atomic_min"
    family = "atomic"
    operands = _OPERANDS


ATOMICS = {"add": AtomicAdd, "max": AtomicMax, "min": AtomicMin}


def atomic(kind: str):
    """The atomic intrinsic of `T.atomic_<kind>`."""
    cls = ATOMICS.get(kind)
    if cls is None:
        raise ValueError(f"no atomic_{kind} in the header library (have {sorted(ATOMICS)})")
    return cls()


ORDERS = {"relaxed": 0, "acquire": 1, "release": 1, "acq_rel": 1, "consume": 1, "seq_cst": 2}


@dataclass(frozen=True)
class AtomicLoad(Intrinsic):
    """One 32- or 64-bit element read at GPU scope with a memory order (T.atomic_load): 0 relaxed,
    1 acquire, 2 sequentially consistent."""
    entry = "tc::atomic_load"
    family = "atomic"
    operands = (Operand("addr", PTR, READ, ("global", "shared")),)
    order: int

    def check(self):
        require(self.order in (0, 1, 2), self, "the order is 0 (relaxed), 1 (acquire) or 2 (seq_cst)")


@dataclass(frozen=True)
class AtomicStore(Intrinsic):
    """One 32- or 64-bit element written at GPU scope with a memory order (T.atomic_store): 0 relaxed,
    1 release, 2 sequentially consistent."""
    entry = "tc::atomic_store"
    family = "atomic"
    operands = (Operand("addr", PTR, WRITE, ("global", "shared")), Operand("value", VALUE))
    order: int

    def check(self):
        require(self.order in (0, 1, 2), self, "the order is 0 (relaxed), 1 (release) or 2 (seq_cst)")

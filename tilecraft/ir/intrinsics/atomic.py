"""Atomics on global or shared memory (device/include/tilecraft/atomic.h), overloaded by type."""
from __future__ import annotations

from dataclasses import dataclass

from .base import ATOMIC, PTR, VALUE, Intrinsic, Operand

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

"""Random numbers (device/include/tilecraft/random.h; the CPU twin in tilecraft_cpu.h): the
thread's Philox4x32-10 generator `tc_rng`, which the code generators declare in every kernel that
uses one and pass as the first argument (`tc::rng_init(tc_rng, seed, seq, off)`, `tc::rng_rand(tc_rng)`)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import VALUE, Effects, Intrinsic, Operand


@dataclass(frozen=True)
class RngInit(Intrinsic):
    """T.rng_init(seed, seq, off): (re)start the thread's generator on stream `seq` at `off`."""
    entry = "tc::rng_init"
    family = "random"
    operands = (Operand("seed", VALUE), Operand("seq", VALUE), Operand("off", VALUE))
    effects = Effects(note="writes the thread's generator state")


@dataclass(frozen=True)
class RngRand(Intrinsic):
    """T.rng_rand(): the next 32-bit word of the thread's generator (advances it)."""
    entry = "tc::rng_rand"
    family = "random"
    effects = Effects(note="reads and advances the thread's generator state")


RNG = (RngInit, RngRand)

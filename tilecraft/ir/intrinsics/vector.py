"""Vector loads and stores of up to 16 bytes (device/include/tilecraft/vector.h)."""
from __future__ import annotations

from dataclasses import dataclass

from ..dtype import DType
from .base import PRED, PTR, READ, WRITE, Effects, Intrinsic, Operand, require


def _check_vec(intr, elem: DType):
    require(intr.vec >= 1 and elem.bytes * intr.vec <= 16, intr, "at most 16 bytes per vector access")


@dataclass(frozen=True)
class VecLoadZfill(Intrinsic):
    """`vec` elements from global or shared memory into registers, converted to `dst`'s type;
    zeros when the predicate is false."""
    entry = "tc::vec_load_zfill"
    family = "vector"
    operands = (Operand("regs", PTR, WRITE, ("local",)), Operand("src", PTR, READ, ("global", "shared")),
                Operand("pred", PRED, optional=True))
    effects = Effects(zfill=True)
    dst: DType
    src: DType
    vec: int

    def check(self):
        _check_vec(self, self.src)


@dataclass(frozen=True)
class VecStore(Intrinsic):
    """`vec` elements from registers or shared memory to global or shared memory, converted."""
    entry = "tc::vec_store"
    family = "vector"
    operands = (Operand("dst", PTR, WRITE, ("global", "shared")), Operand("src", PTR, READ))
    dst: DType
    src: DType
    vec: int

    def check(self):
        _check_vec(self, self.dst)


@dataclass(frozen=True)
class VecConvert(Intrinsic):
    """`vec` elements from shared or global memory to shared or global memory, converted: one aligned
    vector load of `src` and one aligned vector store of `dst` (a tile copy that changes the type, e.g. an
    fp8 tile widened to bf16 for a gemm: both ends start at a multiple of `vec` elements).  A `src` in global
    memory past the tensor's edge is read as zeros (the predicate), as every tile copy reads it."""
    entry = "tc::vec_convert"
    family = "vector"
    operands = (Operand("dst", PTR, WRITE, ("global", "shared")), Operand("src", PTR, READ, ("global", "shared")),
                Operand("pred", PRED, optional=True))
    effects = Effects(zfill=True)
    dst: DType
    src: DType
    vec: int

    def check(self):
        _check_vec(self, self.dst)
        _check_vec(self, self.src)
        require(self.vec in (2, 4, 8, 16), self, "VEC is 2, 4, 8 or 16 (a power-of-two vector)")

"""Hopper tensor-core gemms with wgmma (sm_90a, device/include/tilecraft/gemm_sm90.h): operands
read from shared memory through the async proxy (swizzled with tc::swizzle_offset_sm90)."""
from __future__ import annotations

from dataclasses import dataclass

from ..dtype import DType
from .base import PTR, READ, READ_WRITE, WGMMA, WGMMA_GROUPS, Effects, Intrinsic, Operand, require


def _row_ok(length: int, elem_bytes: int, k_major: bool) -> bool:
    """detail::Sm90Operand<L, ELEM_BYTES, K_MAJOR>::OK: a stored row of 16, 32, 64 or a multiple of
    128 bytes, at least 32 bytes when K runs along the row."""
    rb = length * elem_bytes
    return (rb in (16, 32, 64) or (rb > 0 and rb % 128 == 0)) and (rb >= 32 or not k_major)


def _check_wgmma(g):
    require(g.dtype.name in ("float16", "bfloat16"), g, "operands are float16 or bfloat16")
    require(g.wg >= 1 and g.m % (64 * g.wg) == 0, g, "M must be a multiple of 64*WG (m64 tiles per warpgroup)")
    require(g.n % 8 == 0, g, "N must be a multiple of 8 (wgmma n)")
    require(g.k % 16 == 0, g, "K must be a multiple of 16 (wgmma k16 steps)")
    require(_row_ok(g.k if g.trans_b else g.n, g.dtype.bytes, g.trans_b), g,
            "B's stored row (N, or K when transposed) must be 16, 32, 64 or a multiple of 128 bytes "
            "(>= 32 bytes when it runs along K): other lengths match no wgmma shared-memory layout")


@dataclass(frozen=True)
class GemmSSSm90(Intrinsic):
    """C += A * B by wgmma, A and B shared tiles; commits one wgmma group and waits until at most
    `pending` groups are in flight (a pipelined loop keeps one; C is then valid after WgmmaDrain)."""
    entry = "tc::gemm_ss_sm90"
    family = "wgmma"
    operands = (Operand("A", PTR, READ, ("shared",)), Operand("B", PTR, READ, ("shared",)),
                Operand("C", PTR, READ_WRITE, ("local",)))
    effects = Effects(proxy=WGMMA, commits=WGMMA, waits=WGMMA_GROUPS)
    m: int
    n: int
    k: int
    wg: int
    trans_a: bool
    trans_b: bool
    dtype: DType
    pending: int = 0

    def check(self):
        _check_wgmma(self)
        require(_row_ok(self.m if self.trans_a else self.k, self.dtype.bytes, not self.trans_a), self,
                "A's stored row (K, or M when transposed) must be 16, 32, 64 or a multiple of 128 bytes "
                "(>= 32 bytes when it runs along K): other lengths match no wgmma shared-memory layout")
        require(self.pending >= 0, self, "PENDING must be >= 0")


@dataclass(frozen=True)
class GemmRSSm90(Intrinsic):
    """C += A * B by wgmma, A from registers (the wgmma accumulator layout), B a shared tile;
    synchronous (waits for its own group)."""
    entry = "tc::gemm_rs_sm90"
    family = "wgmma"
    operands = (Operand("A", PTR, READ, ("local",)), Operand("B", PTR, READ, ("shared",)),
                Operand("C", PTR, READ_WRITE, ("local",)))
    effects = Effects(proxy=WGMMA, commits=WGMMA, waits=WGMMA_GROUPS)
    m: int
    n: int
    k: int
    wg: int
    trans_b: bool
    dtype: DType

    def check(self):
        _check_wgmma(self)


@dataclass(frozen=True)
class WgmmaDrain(Intrinsic):
    """Wait for every wgmma group in flight; `nacc` accumulator registers become readable."""
    entry = "tc::wgmma_drain"
    family = "wgmma"
    operands = (Operand("C", PTR, READ_WRITE, ("local", "fragment")),)
    effects = Effects(proxy=WGMMA, waits=WGMMA_GROUPS)
    nacc: int

    def check(self):
        require(self.nacc >= 1, self, "NACC must be >= 1")

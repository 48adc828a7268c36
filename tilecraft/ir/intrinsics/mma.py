"""Tensor-core gemms with mma.sync (sm_80+, device/include/tilecraft/gemm_sm80.h): ldmatrix from
shared tiles (optionally XOR-swizzled), accumulators in registers."""
from __future__ import annotations

from dataclasses import dataclass

from ..dtype import DType
from .base import HOOK, PTR, READ, READ_WRITE, Intrinsic, Operand, require

_ELEMS = ("float16", "bfloat16")


def _check_mma(g, name: str):
    if g.dtype.name in ("float8_e4m3fn", "float8_e5m2") and hasattr(g, "trans_a"):  # gemm_ss: m16n8k32
        require(not g.trans_a and g.trans_b, g, "8-bit operands must both be K-major (A [M][K], B [N][K])")
        require(g.k % 32 == 0, g, "K must be a multiple of 32 for 8-bit operands (mma k32 steps)")
    else:
        require(g.dtype.name in _ELEMS, g, "operands are float16 or bfloat16")
    require(g.wm >= 1 and g.wn >= 1, g, "WM and WN must be >= 1")
    require(g.m % (16 * g.wm) == 0, g, "M must be a multiple of 16*WM (m16 tiles per warp)")
    require(g.n % (8 * g.wn) == 0, g, "N must be a multiple of 8*WN (n8 tiles per warp)")
    require(g.k % 16 == 0, g, "K must be a multiple of 16 (mma k16 steps)")


@dataclass(frozen=True)
class GemmSS(Intrinsic):
    """C[M][N] += A * B, A and B shared tiles; an optional hook object runs before the last k16
    step (a software pipeline's synchronisation, transform/pipeline_copies.py)."""
    entry = "tc::gemm_ss"
    family = "mma.sync"
    operands = (Operand("A", PTR, READ, ("shared",)), Operand("B", PTR, READ, ("shared",)),
                Operand("C", PTR, READ_WRITE, ("local",)), Operand("hook", HOOK, optional=True))
    m: int
    n: int
    k: int
    wm: int
    wn: int
    trans_a: bool
    trans_b: bool
    swz_a: int
    swz_b: int
    dtype: DType

    def check(self):
        _check_mma(self, self.entry)
        require(self.swz_a in (0, 1) and self.swz_b in (0, 1), self, "SWZ_A and SWZ_B must be 0 or 1")


@dataclass(frozen=True)
class GemmSSS4(Intrinsic):
    """C[M][N] (int32) += A[M][K] * B[N][K]^T, int4 shared tiles two per byte, on mma.sync m16n8k64 .s4;
    an optional hook as GemmSS's."""
    entry = "tc::gemm_ss_s4"
    family = "mma.sync"
    operands = GemmSS.operands
    m: int
    n: int
    k: int
    wm: int
    wn: int

    def check(self):
        require(self.wm >= 1 and self.wn >= 1, self, "WM and WN must be >= 1")
        require(self.m % (16 * self.wm) == 0, self, "M must be a multiple of 16*WM (m16 tiles per warp)")
        require(self.n % (8 * self.wn) == 0, self, "N must be a multiple of 8*WN (n8 tiles per warp)")
        require(self.k % 64 == 0, self, "K must be a multiple of 64 (mma k64 steps of int4)")


@dataclass(frozen=True)
class GemmRS(Intrinsic):
    """C[M][N] += A * B, A from registers (a gemm accumulator's layout), B a shared tile."""
    entry = "tc::gemm_rs"
    family = "mma.sync"
    operands = (Operand("A", PTR, READ, ("local",)), Operand("B", PTR, READ, ("shared",)),
                Operand("C", PTR, READ_WRITE, ("local",)))
    m: int
    n: int
    k: int
    wm: int
    wn: int
    trans_b: bool
    swz_b: int
    dtype: DType

    def check(self):
        _check_mma(self, self.entry)
        require(self.wn == 1, self, "A in registers requires WN == 1 (warps only along M)")
        require(self.swz_b in (0, 1), self, "SWZ_B must be 0 or 1")


@dataclass(frozen=True)
class GemmSSLd(GemmSS):
    """GemmSS where A or B is a column slice of a wider shared tile: `lda` / `ldb` are the stored
    row lengths in elements (the parent tile's width), the header's gemm_ss_ld."""
    entry = "tc::gemm_ss_ld"
    lda: int = 0
    ldb: int = 0

    def check(self):
        super().check()
        la = self.m if self.trans_a else self.k
        lb = self.k if self.trans_b else self.n
        require(self.lda >= la and self.ldb >= lb, self, "LDA / LDB must be at least the operand's row length")
        require(self.lda * self.dtype.bytes % 16 == 0 and self.ldb * self.dtype.bytes % 16 == 0, self,
                "stored rows must be whole 16-byte chunks (ldmatrix)")


@dataclass(frozen=True)
class GemmRSLd(GemmRS):
    """GemmRS where B is a column slice of a wider shared tile (`ldb` its stored row length)."""
    entry = "tc::gemm_rs_ld"
    ldb: int = 0

    def check(self):
        super().check()
        require(self.ldb >= (self.k if self.trans_b else self.n), self, "LDB must be at least B's row length")
        require(self.ldb * self.dtype.bytes % 16 == 0, self, "stored rows must be whole 16-byte chunks (ldmatrix)")

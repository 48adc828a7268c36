"""Hopper tensor-core gemms with wgmma (sm_90a, device/include/tilecraft/gemm_sm90.h): operands
read from shared memory through the async proxy (swizzled with tc::swizzle_offset_sm90)."""
from __future__ import annotations

from dataclasses import dataclass

from ..dtype import DType
from .base import PTR, READ, READ_WRITE, WGMMA, WGMMA_GROUPS, WRITE, Effects, Intrinsic, Operand, require


def _row_ok(length: int, elem_bytes: int, k_major: bool) -> bool:
    """detail::Sm90Operand<L, ELEM_BYTES, K_MAJOR>::OK: a stored row of 16, 32, 64 or a multiple of
    128 bytes, at least 32 bytes when K runs along the row."""
    rb = length * elem_bytes
    return (rb in (16, 32, 64) or (rb > 0 and rb % 128 == 0)) and (rb >= 32 or not k_major)


def _check_rows(g, which: str, rows: int, extent: int, length: int):
    """A shared tile's row count (the header's A_ROWS / B_ROWS): the height of its column panels
    when its rows exceed 128 bytes (Sm90Operand::OK, swizzle_offset_sm90's ROWS), so a multiple of
    8 then; the gemm reads `extent` rows of it."""
    require(rows >= extent, g, f"{which}_ROWS (the {which} tile's row count) must be at least the {extent} rows "
            "the gemm reads")
    require(length * g.dtype.bytes <= 128 or rows % 8 == 0, g,
            f"{which}_ROWS must be a multiple of 8: rows over 128 bytes are stored in column panels "
            f"{which}_ROWS rows tall")


def n_split_ok(n: int, wg_n: int, trans_b: bool, elem_bytes: int) -> bool:
    """gemm_ss_sm90's WGN: N splits into wg_n pieces of a multiple of 8 columns, and a B stored
    [K][N] (not transposed) only at its 128-byte column panels (N/wg_n a multiple of 128 bytes)."""
    if wg_n == 1:
        return True
    wn = n // wg_n
    return n % (8 * wg_n) == 0 and (trans_b or (n * elem_bytes > 128 and (wn * elem_bytes) % 128 == 0))


def _resolve_rows(g, field: str, default: int):
    """0 stands for the header's default (the gemm's own extent)."""
    if getattr(g, field) == 0:
        object.__setattr__(g, field, default)


FP8 = ("float8_e4m3fn", "float8_e5m2")


def _check_wgmma(g, fp8_ok: bool = False):
    if fp8_ok and g.dtype.name in FP8:  # k32 .e4m3/.e5m2: no imm-trans, both operands K-major
        require(not g.trans_a and g.trans_b, g, "8-bit operands must both be K-major (A [M][K], B [N][K])")
        require(g.k % 32 == 0, g, "K must be a multiple of 32 for 8-bit operands (wgmma k32 steps)")
    else:
        require(g.dtype.name in ("float16", "bfloat16"), g, "operands are float16 or bfloat16"
                + (" (or, with both operands K-major, float8_e4m3fn / float8_e5m2)" if fp8_ok else ""))
    wg_n = getattr(g, "wg_n", 1)
    require(g.wg >= 1 and g.wg % wg_n == 0 and g.m % (64 * (g.wg // wg_n)) == 0, g,
            "M must be a multiple of 64*WG/WGN (m64 tiles per warpgroup)")
    require(n_split_ok(g.n, wg_n, g.trans_b, g.dtype.bytes), g,
            "N/WGN must be a multiple of 8, and of B's 128-byte column panels when B is stored [K][N]")
    require(g.n % 8 == 0, g, "N must be a multiple of 8 (wgmma n)")
    require(g.k % 16 == 0, g, "K must be a multiple of 16 (wgmma k16 steps)")
    require(_row_ok(g.k if g.trans_b else g.n, g.dtype.bytes, g.trans_b), g,
            "B's stored row (N, or K when transposed) must be 16, 32, 64 or a multiple of 128 bytes "
            "(>= 32 bytes when it runs along K): other lengths match no wgmma shared-memory layout")


@dataclass(frozen=True)
class GemmSSSm90(Intrinsic):
    """C += A * B by wgmma, A and B shared tiles (16-bit floats, or 8-bit floats with both K-major); commits one wgmma group and waits until at most
    `pending` groups are in flight (a pipelined loop keeps one; C is then valid after WgmmaDrain).
    `a_rows` / `b_rows`: the row counts of the shared tiles A and B point into (0: the gemm's own
    extents, as the header defaults them)."""
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
    a_rows: int = 0
    b_rows: int = 0
    wg_n: int = 1   # warpgroups along N (the header's WGN; left out of the call when 1)

    def params(self) -> tuple:
        ps = super().params()
        return ps[:-1] if self.wg_n == 1 else ps

    def check(self):
        _check_wgmma(self, fp8_ok=True)
        require(_row_ok(self.m if self.trans_a else self.k, self.dtype.bytes, not self.trans_a), self,
                "A's stored row (K, or M when transposed) must be 16, 32, 64 or a multiple of 128 bytes "
                "(>= 32 bytes when it runs along K): other lengths match no wgmma shared-memory layout")
        require(self.pending >= 0, self, "PENDING must be >= 0")
        _resolve_rows(self, "a_rows", self.k if self.trans_a else self.m)
        _resolve_rows(self, "b_rows", self.n if self.trans_b else self.k)
        _check_rows(self, "A", self.a_rows, self.k if self.trans_a else self.m, self.m if self.trans_a else self.k)
        _check_rows(self, "B", self.b_rows, self.n if self.trans_b else self.k, self.k if self.trans_b else self.n)


@dataclass(frozen=True)
class GemmRSSm90(Intrinsic):
    """C += A * B by wgmma, A from registers (the wgmma accumulator layout), B a shared tile;
    synchronous (waits for its own group).  `b_rows`: the row count of B's shared tile (0: the
    gemm's own extent, as the header defaults it)."""
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
    b_rows: int = 0

    def check(self):
        _check_wgmma(self)
        _resolve_rows(self, "b_rows", self.n if self.trans_b else self.k)
        _check_rows(self, "B", self.b_rows, self.n if self.trans_b else self.k, self.k if self.trans_b else self.n)


@dataclass(frozen=True)
class GemmRSSm90Async(GemmRSSm90):
    """As GemmRSSm90, returning with its wgmma group in flight: the packed A fragments stay in H
    (`held` registers of this thread: m/wg/64 * k/16 * 4), untouched with C until WgmmaWait(0) and
    WgmmaHoldFence retire them (transform/pipelining/overlap.py)."""
    entry = "tc::gemm_rs_sm90_async"
    operands = GemmRSSm90.operands + (Operand("H", PTR, WRITE, ("local",)),)
    effects = Effects(proxy=WGMMA, commits=WGMMA)

    @property
    def held(self) -> int:
        return self.m // self.wg // 64 * (self.k // 16) * 4


@dataclass(frozen=True)
class WgmmaWait(Intrinsic):
    """Wait until at most `pending` wgmma groups are in flight; then the `nacc` accumulator
    registers of C, written by an older group, may be read."""
    entry = "tc::wgmma_wait"
    family = "wgmma"
    operands = (Operand("C", PTR, READ_WRITE, ("local", "fragment")),)
    effects = Effects(proxy=WGMMA, waits=WGMMA_GROUPS)
    pending: int
    nacc: int

    def check(self):
        require(self.pending >= 0 and self.nacc >= 1, self, "PENDING must be >= 0 and NACC >= 1")


@dataclass(frozen=True)
class WgmmaHoldFence(Intrinsic):
    """After the wait that retired a GemmRSSm90Async: its `n` held registers may be reused."""
    entry = "tc::wgmma_hold_fence"
    family = "wgmma"
    operands = (Operand("H", PTR, READ_WRITE, ("local",)),)
    n: int

    def check(self):
        require(self.n >= 1, self, "N must be >= 1")


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

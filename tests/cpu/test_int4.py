"""int4 (TileLang's T.int4) on the CPU target: storage two per byte in a torch int8 tensor of shape
(..., last // 2), the element at the even flat index in the low nibble, sign-extended when read;
copies between global, shared, fragment and local tiles; T.gemm int4 x int4 -> int32; and the
refusals at the user's line.  References: torch int32 arithmetic on the unpacked values."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T

pytestmark = pytest.mark.cxx


def pack(x: torch.Tensor) -> torch.Tensor:
    """TileLang's packing of logical int4 values (an int8 tensor in -8..7), two per byte."""
    x = x.to(torch.int16)
    return ((x[..., ::2] & 0xF) | ((x[..., 1::2] & 0xF) << 4)).to(torch.int8).contiguous()


def unpack(p: torch.Tensor) -> torch.Tensor:
    lo = (p.to(torch.int16) << 12 >> 12).to(torch.int8)
    hi = (p.to(torch.int16) << 8 >> 12).to(torch.int8)
    return torch.stack([lo, hi], dim=-1).flatten(-2)


def wrap4(x: torch.Tensor) -> torch.Tensor:
    return ((x.to(torch.int64) & 0xF) ^ 8) - 8


def rand4(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-8, 8, shape, dtype=torch.int8, generator=g)


def test_pack_helpers_agree():
    x = rand4(6, 10, seed=1)
    assert torch.equal(unpack(pack(x)), x)
    assert torch.equal(wrap4(torch.tensor([7, 8, -9, 23, -8])), torch.tensor([7, -8, 7, 7, -8]))


def _unpack_kernel(M, K, bm, bk, col0):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.int4), C: T.Tensor((M, bk), T.int32)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            A_s = T.alloc_shared((bm, bk), T.int4)
            A_f = T.alloc_fragment((bm, bk), T.int4)
            A_l = T.alloc_local((bm, bk), T.int4)
            C_f = T.alloc_fragment((bm, bk), T.int32)
            T.copy(A[bx * bm, col0], A_s)     # global int4 -> shared int4 (col0 may be odd)
            T.copy(A_s, A_f)                  # shared -> fragment
            T.copy(A_f, A_l)                  # fragment -> local
            T.copy(A_l, C_f)                  # int4 -> int32, sign-extended
            T.copy(C_f, C[bx * bm, 0])
    return main


@pytest.mark.parametrize("col0", [0, 3])
def test_copies_sign_extend_every_nibble(col0):
    M, K, bm, bk = 40, 32, 16, 18          # a ragged last block of rows (40 = 2 * 16 + 8)
    a = rand4(M, K, seed=col0)
    k = tilelang.compile(_unpack_kernel(M, K, bm, bk, col0), out_idx=-1, target="cpu")
    c = k(pack(a))
    assert c.dtype == torch.int32 and c.shape == (M, bk)
    assert torch.equal(c, a[:, col0:col0 + bk].to(torch.int32))


def _pack_kernel(M, N, bn):
    @T.prim_func
    def main(X: T.Tensor((M, N), T.int32), Y: T.Tensor((M, N), T.int4)):
        with T.Kernel(T.ceildiv(N, bn), threads=64) as bx:
            Y_s = T.alloc_shared((M, bn), T.int4)
            for i, j in T.Parallel(M, bn):
                Y_s[i, j] = T.cast(X[i, bx * bn + j], T.int4)   # the low 4 bits
            T.copy(Y_s, Y[0, bx * bn])
    return main


@pytest.mark.parametrize("bn", [8, 3])
def test_stores_wrap_and_pack_two_per_byte(bn):
    """Each block writes bn columns: with bn = 3 two blocks write the two nibbles of one byte."""
    M, N = 5, 12
    g = torch.Generator().manual_seed(bn)
    x = torch.randint(-40, 40, (M, N), dtype=torch.int32, generator=g)
    k = tilelang.compile(_pack_kernel(M, N, bn), out_idx=-1, target="cpu")
    y = k(x)
    assert y.dtype == torch.int8 and y.shape == (M, N // 2)
    assert torch.equal(unpack(y).to(torch.int64), wrap4(x))
    assert torch.equal(y, pack(wrap4(x).to(torch.int8)))


def _gemm(M, N, K, bm, bn, bk, trans_b):
    b_shape = (N, K) if trans_b else (K, N)
    bs_shape = (bn, bk) if trans_b else (bk, bn)

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int4), B: T.Tensor(b_shape, T.int4), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.int4)
            B_s = T.alloc_shared(bs_shape, T.int4)
            C_f = T.alloc_fragment((bm, bn), T.int32)
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], A_s)
                if trans_b:
                    T.copy(B[bx * bn, ko * bk], B_s)
                else:
                    T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=trans_b)
            T.copy(C_f, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("trans_b", [True, False])
def test_gemm_int4_accumulates_exactly_in_int32(trans_b):
    M, N, K = 48, 40, 160                   # ragged M, N and K tiles
    a, b = rand4(M, K, seed=2), rand4(*((N, K) if trans_b else (K, N)), seed=3)
    k = tilelang.compile(_gemm(M, N, K, 32, 32, 64, trans_b), out_idx=-1, target="cpu")
    c = k(pack(a), pack(b))
    bt = b.to(torch.int32).T if trans_b else b.to(torch.int32)
    assert torch.equal(c, a.to(torch.int32) @ bt)
    assert c.abs().max() > 64               # not a small-value coincidence


def test_wrong_tensor_dtype_names_the_packing():
    k = tilelang.compile(_unpack_kernel(16, 8, 16, 8, 0), out_idx=-1, target="cpu")
    with pytest.raises(TypeError, match=r"expects dtype int4 \(held in an int8 tensor of shape \(16, 4\)"):
        k(torch.zeros(16, 8, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"\(16, 4\)"):
        k(torch.zeros(16, 8, dtype=torch.int8))      # the unpacked shape


def test_odd_last_dimension_is_refused_at_the_line():
    with pytest.raises(tilelang.TilecraftError, match="last dimension 7 is odd") as e:
        @T.prim_func
        def main(A: T.Tensor((4, 7), T.int4)):
            with T.Kernel(1) as bx:
                pass
    assert "test_int4.py" in str(e.value)


def _compile_error(body_kind):
    @T.prim_func
    def main(A: T.Tensor((16, 16), T.int4), C: T.Tensor((16, 16), T.int32)):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((16, 16), T.int4)
            S = T.alloc_fragment((16,), T.int4)
            G = T.alloc_fragment((16, 16), T.float32)
            C_f = T.alloc_fragment((16, 16), T.int32)
            T.copy(A, A_s)
            if body_kind == "add":
                for i, j in T.Parallel(16, 16):
                    A_s[i, j] = A_s[i, j] + A_s[j, i]
            elif body_kind == "mixed_gemm":
                T.gemm(A_s, A_s, G, transpose_B=True)
            elif body_kind == "reduce":
                T.reduce_sum(A_s, S, dim=1)
            T.copy(C_f, C)
    return main


@pytest.mark.parametrize("kind,message", [
    ("add", r"`A_s\[i, j\] \+ A_s\[j, i\]`: the operator \+ on int4 values would give an int4 result"),
    ("mixed_gemm", r"an int4 gemm multiplies int4 by int4 into an int32 accumulator"),
    ("reduce", r"T.reduce_sum: A_s is int4"),
])
def test_what_int4_cannot_do_is_refused_at_the_line(kind, message):
    with pytest.raises(tilelang.TilecraftError, match=message) as e:
        tilelang.compile(_compile_error(kind), target="cpu")
    assert "test_int4.py" in str(e.value)


def test_int4_widened_arithmetic_is_exact():
    """A cast to int32 (or float32) first: exact for every int4 value."""
    @T.prim_func
    def main(A: T.Tensor((8, 16), T.int4), C: T.Tensor((8, 16), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(8, 16):
                C[i, j] = T.cast(A[i, j], T.float32) * 0.5 + T.cast(A[i, j], T.int32) * 3
    a = rand4(8, 16, seed=5)
    c = tilelang.compile(main, out_idx=-1, target="cpu")(pack(a))
    assert torch.equal(c, a.float() * 0.5 + a.float() * 3)


def test_a_cast_into_int4_wraps_as_a_value():
    """T.cast(x, int4) is x's low 4 bits, sign-extended, before any store."""
    @T.prim_func
    def main(X: T.Tensor((64,), T.int32), C: T.Tensor((64,), T.int32)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                C[i] = T.cast(T.cast(X[i], T.int4), T.int32) * 100
    x = torch.arange(-32, 32, dtype=torch.int32)
    c = tilelang.compile(main, out_idx=-1, target="cpu")(x)
    assert torch.equal(c.to(torch.int64), wrap4(x) * 100)


@tilelang.jit(target="cpu")
def _eager_unpack(A, block_M: int = 16):
    M, K = T.const("M, K")
    A: T.Tensor((M, K), T.int4)
    C = T.empty((M, K), T.int32)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        for i, j in T.Parallel(block_M, K):
            C[bx * block_M + i, j] = T.cast(A[bx * block_M + i, j], T.int32)
    return C


def test_eager_jit_binds_the_logical_int4_shape():
    """K is the number of int4 elements: twice the int8 tensor's last dimension."""
    a = rand4(32, 24, seed=7)
    c = _eager_unpack(pack(a))
    assert c.shape == (32, 24) and torch.equal(c, a.to(torch.int32))

"""Newer TileLang spellings (language/compat.py, tileops.py): bitwise tile reductions
(T.reduce_bitand / bitor / bitxor) on the CPU target against numpy and compiled for sm_80 (their
butterflies and cross-warp combine); T.atomic_addx2 / x4, T.any_of / T.all_of, T.index_to_coordinates,
T.get_block_bindings, T.Serial, T.reshape, T.gemm_v2 and the no-op annotations in one CPU program
against numpy.  GPU twin: tests/gpu/test_newer_spellings_gpu.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM80 = {"kind": "cuda", "arch": "sm_80"}


def bit_reduce_program(M, N, kind, dim, threads=128):
    out_shape = (M,) if dim == 1 else (N,)
    fn = {"bitand": T.reduce_bitand, "bitor": T.reduce_bitor, "bitxor": T.reduce_bitxor}[kind]

    @T.prim_func
    def main(X: T.Tensor((M, N), "int32"), Y: T.Tensor(out_shape, "int32")):
        with T.Kernel(1, threads=threads) as bx:
            f = T.alloc_fragment((M, N), "int32")
            r = T.alloc_fragment(out_shape, "int32")
            T.copy(X, f)
            fn(f, r, dim=dim)
            T.copy(r, Y)
    return main


def bit_reference(x: np.ndarray, kind: str, dim: int) -> np.ndarray:
    return {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}[kind].reduce(x, axis=dim)


CASES = [(kind, dim) for kind in ("bitand", "bitor", "bitxor") for dim in (0, 1)]


def _bits(M, N):
    # bitand of random words is mostly 0: set most bits so every kind has something to show
    x = torch.randint(-2**31, 2**31 - 1, (M, N), dtype=torch.int32)
    return x | torch.where(torch.rand(M, N) < 0.7, torch.tensor(-1 ^ 0xF0F, dtype=torch.int32), torch.tensor(0, dtype=torch.int32))


@pytest.mark.parametrize("kind, dim", CASES)
def test_bit_reductions_on_the_cpu_target(kind, dim):
    M, N = 8, 64
    x = _bits(M, N)
    y = torch.empty(M if dim == 1 else N, dtype=torch.int32)
    tilelang.compile(bit_reduce_program(M, N, kind, dim), target="cpu")(x, y)
    assert np.array_equal(y.numpy(), bit_reference(x.numpy(), kind, dim))


@pytest.mark.cuda_compile
def test_bit_reductions_compile():
    src = tilelang.compile(bit_reduce_program(4, 256, "bitxor", 1), target=SM80).get_kernel_source()
    assert "tc::BitXorOp" in src


def test_bit_reduction_of_floats_is_refused():
    with pytest.raises(TilecraftError, match="bitwise reduction takes integer tiles"):
        @T.prim_func
        def main(X: T.Tensor((8, 8), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                f = T.alloc_fragment((8, 8), "float32")
                r = T.alloc_fragment((8,), "float32")
                T.copy(X, f)
                T.reduce_bitor(f, r, dim=1)
                T.copy(r, Y)


def spellings_program(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Acc: T.Tensor((M, N), "float32"), Flags: T.Tensor((4,), "int32"),
             Coords: T.Tensor((M * N, 2), "int32"), Flat: T.Tensor((M * N,), "float32"), G: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            T.annotate_restrict_buffers(X, Acc)
            T.pdl_sync()
            xs = T.alloc_shared((M, N), "float32")
            T.copy(X, xs)
            for i, j in T.Parallel(M, N // 4):
                T.atomic_addx4(Acc[i, j * 4], xs[i, j * 4])
            for i, j in T.Parallel(M, N // 2):
                T.atomic_addx2(Acc[i, j * 2], xs[i, j * 2])
            v = T.alloc_local((4,), "int32")
            for k in T.Serial(4):
                v[k] = k % 2
            Flags[0] = T.any_of(v)
            Flags[1] = T.all_of(v)
            Flags[2] = T.any_of(v[0:1])
            v[0] = 3
            Flags[3] = T.all_of(v[0:2])
            for t in T.serial(M * N):
                c = T.index_to_coordinates(t, (M, N))
                Coords[t, 0] = c[0]
                Coords[t, 1] = c[1]
            flat = T.reshape(X, (M * N,))
            for t in T.serial(M * N):
                Flat[t] = flat[t]
            b = T.get_block_bindings()
            G[0] = b[0] + 7
            G[1] = 1
            T.pdl_trigger()
    return main


def test_newer_spellings_on_the_cpu_target():
    M, N = 4, 16
    x = torch.randn(M, N)
    acc = torch.randn(M, N)
    start = acc.clone()
    flags = torch.empty(4, dtype=torch.int32)
    coords = torch.empty(M * N, 2, dtype=torch.int32)
    flat = torch.empty(M * N)
    g = torch.empty(2, dtype=torch.int32)
    tilelang.compile(spellings_program(M, N), target="cpu")(x, acc, flags, coords, flat, g)
    torch.testing.assert_close(acc, start + 2 * x)
    assert flags.tolist() == [1, 0, 0, 1]
    t = torch.arange(M * N)
    assert coords.tolist() == torch.stack([t // N, t % N], 1).tolist()
    assert torch.equal(flat, x.reshape(-1)) and g.tolist() == [7, 1]


def test_gemm_v2_is_gemm():
    assert T.gemm_v2 is T.gemm and T.gemm_v1 is T.gemm and T.Serial is T.serial


def test_atomic_addx2_takes_elements():
    with pytest.raises(TilecraftError, match="T.atomic_addx2: the value is a buffer element"):
        @T.prim_func
        def main(Acc: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.atomic_addx2(Acc[0], 1.0)


def test_any_of_reads_local_buffers():
    with pytest.raises(TilecraftError, match="T.any_of: f is a fragment buffer"):
        @T.prim_func
        def main(X: T.Tensor((8,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                f = T.alloc_fragment((8,), "int32")
                T.copy(X, f)
                X[0] = T.any_of(f)

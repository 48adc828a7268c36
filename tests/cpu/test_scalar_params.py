"""Scalar `@T.prim_func` parameters (`n: T.int32`, TileLang's scalar arguments): passed by value at
each call, in signature order among the tensors; usable in the body and in the grid; one compiled
kernel serves every value.  CPU target against torch; `out_idx` counts the scalars as TileLang does;
a negative value keeps the bounds guards (a scalar is not a size); mistakes are clear errors;
sm_90a compiles the scalar as an `int` kernel parameter the launcher packs (unverified on the GPU)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError


@tilelang.jit
def shifted_add(N, blk):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), n: T.int32, B: T.Tensor((N,), "float32"), off: T.int32):
        with T.Kernel(T.ceildiv(n, blk), threads=32) as bx:   # the grid follows the scalar
            for i in T.Parallel(blk):
                if bx * blk + i < n:
                    B[bx * blk + i] = A[bx * blk + i + off] * 2 + n
    return main


def test_scalars_sized_grid_and_values(build, device):
    k = build(shifted_add, 256, 32)
    a = torch.randn(256)
    for n, off in ((100, 0), (256, 0), (37, 5), (1, 200)):   # one kernel for every value
        b = torch.full((256,), -7.0, device=device)
        k(a.to(device), n, b, off)
        want = torch.full((256,), -7.0)
        want[:n] = a[off:off + n] * 2 + n
        torch.testing.assert_close(b.cpu(), want)


def shift_func(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), n: T.int32, B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                B[i] = A[i + n]
    return main


def shift(N):
    return tilelang.compile(shift_func(N), out_idx=[-1], target="cpu")


def test_out_idx_counts_scalars_and_a_negative_scalar_keeps_the_guards():
    k = shift(64)
    a = torch.arange(64).float() + 1
    want = torch.zeros(64)
    want[3:] = a[:61]
    torch.testing.assert_close(k(a, -3), want)       # A[i - 3] below 0 reads as 0, not out of bounds
    want = torch.zeros(64)
    want[:59] = a[5:]
    torch.testing.assert_close(k(a, 5), want)


def test_the_printed_program_keeps_the_scalar_in_place():
    text = shift(8).func.script()
    assert 'def main(A: T.Tensor((8,), "float32"), n: T.int32, B: T.Tensor((8,), "float32")):' in text


def test_bad_scalar_values_are_call_errors():
    k = shift(16)
    a = torch.randn(16)
    with pytest.raises(TypeError, match="parameter 'n' is a scalar"):
        k(a, 1.5)
    with pytest.raises(ValueError, match="out of range"):
        k(a, 2 ** 31)
    with pytest.raises(TypeError, match="1 scalar"):
        k(a)


def test_non_int32_scalar_is_refused_at_its_line():
    with pytest.raises(TilecraftError, match="scalar parameter of dtype float32") as e:
        @T.prim_func
        def main(A: T.Tensor((16,), "float32"), s: T.float32):
            with T.Kernel(1, threads=32) as bx:
                A[0] = s
    assert "test_scalar_params.py" in str(e.value)


def test_out_idx_on_a_scalar_is_an_error():
    with pytest.raises(ValueError, match="a scalar"):
        tilelang.compile(shift_func(8), out_idx=[1], target="cpu")


@pytest.mark.cuda_compile
def test_scalar_is_an_int_kernel_parameter_on_sm90a():
    k = tilelang.compile(shifted_add.fn(256, 32), target={"kind": "cuda", "arch": "sm_90a"})
    src = k.get_kernel_source()
    assert "int n" in src and "int off" in src

"""T.infinity, T.max_value, T.min_value and NaN literals of every dtype, on every target (see
conftest.py: CPU against torch, compiled for sm_90a; tests/cuda/test_dtype_limits_compile.py
compiles them for sm_80 too and reads the source).

TileLang's meaning (its `tl.infinity`): float16, bfloat16, float32, float64 and float8_e5m2 have an
infinity; float8_e4m3fn has none (448 is its largest value, S.1111.111 its NaN) and integers have
none: asking for one is an error.  T.infinity("float8_e5m2") was 57344 on the CPU target (the
saturating float -> fp8 conversion made the constant).
"""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

FLOATS = ["float16", "bfloat16", "float32", "float64", "float8_e5m2", "float8_e4m3fn"]
INTS = ["int8", "uint8", "int16", "int32", "int64"]
HAS_INF = ["float16", "bfloat16", "float32", "float64", "float8_e5m2"]


@tilelang.jit(out_idx=[-1])
def float_limits(dtype):
    has_inf = dtype in HAS_INF

    @T.prim_func
    def main(X: T.Tensor((8,), dtype), Y: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                if i == 0:
                    Y[i] = T.max_value(dtype)
                elif i == 1:
                    Y[i] = T.min_value(dtype)
                elif i == 2:
                    Y[i] = T.infinity(dtype) if has_inf else T.max_value(dtype)
                elif i == 3:
                    Y[i] = -T.infinity(dtype) if has_inf else T.min_value(dtype)
                elif i == 4:
                    Y[i] = T.cast(float("nan"), dtype)
                elif i == 5:
                    Y[i] = T.max(X[i], T.min_value(dtype))       # a limit as a reduction identity would use it
                elif i == 6:
                    Y[i] = T.if_then_else(X[i] < T.infinity(dtype) if has_inf else X[i] < T.max_value(dtype), X[i], 0)
                else:
                    Y[i] = X[i]
    return main


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_limits_infinities_and_nan(build, device, dtype):
    td = getattr(torch, dtype)
    fi = torch.finfo(td)
    x = torch.randn(8, device=device).to(td)
    y = build(float_limits, dtype)(x).double().cpu()
    big = float("inf") if dtype in HAS_INF else fi.max
    want = torch.tensor([fi.max, fi.min, big, -big, float("nan"), x[5].double().cpu().item(),
                         x[6].double().cpu().item(), x[7].double().cpu().item()], dtype=torch.float64)
    assert torch.equal(torch.isnan(y), torch.isnan(want)), (y, want)
    keep = ~torch.isnan(want)
    assert torch.equal(y[keep], want[keep]), (y, want)


@tilelang.jit(out_idx=[-1])
def int_limits(dtype):
    @T.prim_func
    def main(Y: T.Tensor((2,), dtype)):
        with T.Kernel(1, threads=32) as bx:
            Y[0] = T.max_value(dtype)
            Y[1] = T.min_value(dtype)
    return main


@pytest.mark.parametrize("dtype", INTS)
def test_integer_limits(build, device, dtype):
    ii = torch.iinfo(getattr(torch, dtype))
    assert build(int_limits, dtype)().cpu().tolist() == [ii.max, ii.min]


def test_folded_limits_are_the_dtype_values():
    assert T.infinity("float8_e5m2").value == float("inf") and T.infinity("float16").value == float("inf")
    for d in FLOATS:
        fi = torch.finfo(getattr(torch, d))
        assert T.max_value(d).value == fi.max and T.min_value(d).value == fi.min
    for d in INTS:
        ii = torch.iinfo(getattr(torch, d))
        assert T.max_value(d).value == ii.max and T.min_value(d).value == ii.min


@pytest.mark.parametrize("dtype,match", [
    ("float8_e4m3fn", "float8_e4m3fn has no infinity"), ("int32", "int32 has no infinity"),
    ("uint8", "uint8 has no infinity"), ("bool", "bool has no infinity")])
def test_infinity_of_a_type_without_one_is_an_error(dtype, match):
    with pytest.raises(TilecraftError, match=match) as info:
        @T.prim_func
        def main(Y: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                Y[0] = T.infinity(dtype)
    assert info.value.span is not None and info.value.span.file == __file__
    assert "T.infinity(dtype)" in info.value.span.source_line

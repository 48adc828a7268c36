"""T.infinity / T.max_value / T.min_value / NaN of every float dtype compile for sm_80 and sm_90a,
and the fp8 infinities are built from their bits (the __nv_fp8_* constructors saturate an infinity
to the largest finite value).  The CPU target runs them against torch: tests/cpu/test_dtype_limits.py."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_dtype_limits import FLOATS, float_limits  # noqa: E402


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_float_limits_compile(arch, dtype):
    src = tilelang.compile(float_limits.fn(dtype), out_idx=[-1],
                           target={"kind": "cuda", "arch": arch}).get_kernel_source()
    body = src.split("__global__")[1]
    if dtype == "float8_e5m2":
        assert "tc::infinity<tc::fp8_e5m2_t>()" in body and "tc::neg_infinity<tc::fp8_e5m2_t>()" in body
    if dtype == "float8_e4m3fn":
        assert "infinity" not in body      # it has none: T.infinity refuses it
    assert f"tc::nan<" in body

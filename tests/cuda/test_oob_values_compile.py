"""T.annotate_safe_value / T.annotate_padding compile for sm_80 and sm_90a without the zero-filling
copy paths: cp.async and vector loads with zero fill and TMA read past a tensor as 0, so a copy
whose fill value is not zero moves element by element through guarded loads that give the value
(ir/oob.py).  The CPU target runs the same programs against torch: tests/cpu/test_oob_values.py.
Unverified on a GPU."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_oob_values import padded_tile, ragged_gemm, tile_copy  # noqa: E402

ARCHS = ["sm_80", "sm_90a"]


def _compile(func, arch):
    return tilelang.compile(func, out_idx=[-1], target={"kind": "cuda", "arch": arch})


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("into", ["shared", "fragment"])
def test_safe_value_copies_take_the_element_path(arch, into):
    src = _compile(tile_copy.fn(-7.5, into), arch).get_kernel_source()
    assert "zfill" not in src and ": -7.5f)" in src
    plain = _compile(tile_copy.fn(0.0, into), arch).get_kernel_source()
    assert "zfill" in plain   # without a fill value the zero-filling vector path stays


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("by_copy", [False, True])
def test_padding_compiles_to_its_value(arch, by_copy):
    src = _compile(padded_tile.fn(3.25, by_copy), arch).get_kernel_source()
    assert "zfill" not in src and ": 3.25f)" in src


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_pipelined_gemm_with_safe_values_loads_without_zero_fill(arch):
    k = _compile(ragged_gemm.fn(), arch)
    src = k.get_kernel_source()
    assert "zfill" not in src and "tma_load" not in src.lower()
    assert "tc::cast<tc::half_t>(1.0f)" in src and "tc::cast<tc::half_t>(2.0f)" in src
    if arch == "sm_90a":
        assert "T.annotate_safe_value" in k.get_plan()   # the TMA refusal says why

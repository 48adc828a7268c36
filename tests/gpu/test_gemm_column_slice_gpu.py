"""`T.gemm` on column slices of a wider shared tile, on the GPU against torch (compile-only twin
and CPU run: tests/cuda/test_gemm_column_slice.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_gemm_column_slice import CASES, LOOP_CASES, check, check_b, check_loop  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case", CASES + [dict(M=64, N=32, W=96, k1=80, c0=16)],
                         ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_column_slices_on_gpu(case):
    check(lambda f: tilelang.compile(f, target="cuda"), case, "cuda")


def test_column_slice_b_on_gpu():
    check_b(lambda f: tilelang.compile(f, target="cuda"), 64, 64, 64, 256, 128, "cuda")


@pytest.mark.parametrize("case", LOOP_CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_loop_variable_slices_on_gpu(case):
    check_loop(lambda f: tilelang.compile(f, target="cuda"), device="cuda", **case)

"""A gemm reading the shared tile its fragment operand was copied from, on the GPU against torch
(CPU run and compile checks: tests/cuda/test_gemm_copied_operand.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_gemm_copied_operand import check  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("num_stages", [1, 2])
@pytest.mark.parametrize("write_between", [False, True])
def test_copied_operand_on_gpu(num_stages, write_between):
    check(lambda f: tilelang.compile(f, target="cuda"), "cuda", num_stages=num_stages, write_between=write_between)

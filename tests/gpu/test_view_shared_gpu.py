"""`T.view` on the GPU against torch on fresh inputs (compile-only twin and CPU runs:
tests/cpu/test_view_shared.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_view_shared import check_reinterpret, check_scratch, reinterpret, scratch_through_view  # noqa: E402

pytestmark = pytest.mark.gpu


def test_view_reinterprets_the_bytes_on_gpu():
    k = tilelang.compile(reinterpret(), out_idx=[1, 2], target="cuda")
    for _ in range(3):
        check_reinterpret(k, device="cuda")


def test_partial_sums_leave_through_a_view_on_gpu():
    k = tilelang.compile(scratch_through_view(), target="cuda")
    for _ in range(3):
        check_scratch(k, device="cuda")

"""`break` in a serial loop on the GPU against torch (compile-only twin: tests/cuda/test_break.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_break import _check, first_above  # noqa: E402

pytestmark = pytest.mark.gpu


def test_break_on_gpu():
    k = tilelang.compile(first_above(256, 300), out_idx=[1], target="cuda")
    for _ in range(3):
        _check(k, 256, 300, device="cuda")

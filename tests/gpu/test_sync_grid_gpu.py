"""T.sync_grid() on the GPU against torch (compile-only twin: tests/cuda/test_sync_grid.py)."""
from __future__ import annotations

import os
import sys

import tilecraft as tilelang
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_sync_grid import _check, split_then_combine  # noqa: E402

pytestmark = pytest.mark.gpu


def test_grid_barrier_on_gpu():
    k = tilelang.compile(split_then_combine(R=200, C=512, blocks=132), out_idx=[1, 2], target="cuda")
    for _ in range(3):
        _check(k, 200, 512, device="cuda")

"""T.atomic_*(..., return_prev=True) on the GPU: stream compaction with slots claimed by atomics
(compile-only twin: tests/cuda/test_atomic_return_prev.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_atomic_return_prev import _check, compact_positive  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("N", [1000, 100_003])
def test_compaction_on_gpu(N):
    k = tilelang.compile(compact_positive(N), target="cuda")
    for _ in range(3):
        _check(k, N, device="cuda")

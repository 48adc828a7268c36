"""T.Persistent on the GPU against torch (compile-only twin: tests/cuda/test_persistent.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_persistent import _check, persistent_matmul  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("M,N,K,blocks", [(200, 330, 64, 7), (1000, 1000, 256, 132)])
def test_persistent_matmul_on_gpu(M, N, K, blocks):
    k = tilelang.compile(persistent_matmul(M, N, K, blocks), out_idx=[2], target="cuda")
    _check(k, M, N, K, device="cuda")

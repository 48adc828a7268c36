"""Global tensor views (T.Tensor(shape, dtype, X.data)) on the GPU against torch, on the default
CUDA path (compile-only twin: tests/cuda/test_tensor_views.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_tensor_views import _check, viewed_matmul  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("B,M,K,N", [(4, 32, 64, 64), (3, 40, 96, 128)])
def test_views_on_gpu(B, M, K, N):
    k = tilelang.compile(viewed_matmul(B, M, K, N), out_idx=[2], target="cuda")
    for _ in range(2):
        _check(k, "cuda", B, M, K, N)

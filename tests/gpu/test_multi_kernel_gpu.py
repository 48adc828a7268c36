"""Programs with several T.Kernel blocks on the GPU: the split kernel and the combine kernel run in
program order on the caller's stream, against torch on fresh random inputs (compile-only twin:
tests/cuda/test_multi_kernel.py).  Not yet run on hardware when written."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_multi_kernel import _check, split_row_sum  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("M,N,splits", [(96, 1000, 4), (257, 3001, 7)])
def test_split_then_combine_on_gpu(M, N, splits):
    k = tilelang.compile(split_row_sum(M, N, splits), out_idx=[1, 2], target="cuda")
    for _ in range(3):  # fresh inputs each call; the second kernel must see the first's writes
        _check(k, M, N, device="cuda")


def test_split_then_combine_on_a_side_stream():
    k = tilelang.compile(split_row_sum(), out_idx=[1, 2], target="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        _check(k, device="cuda")
    s.synchronize()

"""T.c2d_im2col on the GPU: conv2d through im2col tiles against torch.nn.functional.conv2d, on the
default CUDA path (compile-only and CPU-target twin: tests/cuda/test_c2d_im2col.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_c2d_im2col import CASES, _check, conv_im2col  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case", CASES + [(4, 64, 17, 15, 128, 3, 1, 1, 1)],
                         ids=lambda c: "x".join(map(str, c)))
def test_conv2d_through_im2col_on_gpu(case):
    k = tilelang.compile(conv_im2col(*case, stages=3), out_idx=[2], target="cuda")
    for _ in range(2):
        _check(k, "cuda", *case)

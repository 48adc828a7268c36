"""`T.c2d_im2col` on the GPU against torch (CPU-target and compile-only twins:
tests/cpu/test_im2col_tiles.py, tests/cuda/test_im2col_tiles_compile.py): the tiles against
`unfold`, and a convolution through it against `torch.conv2d`, ragged and in the examples' shape."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_im2col_tiles import CONV_CASES, TILE_CASES, conv_kernel, conv_ref, im2col_ref, im2col_tiles  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case", TILE_CASES, ids=[str(c) for c in TILE_CASES])
def test_tile_matches_unfold_on_gpu(case):
    N, C, H, W, K, S, D, P, bm, bk = case
    k = tilelang.compile(im2col_tiles(*case), out_idx=[1], target="cuda")
    img = torch.randn(N, H, W, C, device="cuda")
    got = k(img)
    ref = im2col_ref(img, K, S, D, P)
    rows, cols = ref.shape
    torch.testing.assert_close(got[:rows, :cols], ref)
    assert torch.count_nonzero(got[rows:, :]) == 0 and torch.count_nonzero(got[:, cols:]) == 0


EXAMPLE = (128, 128, 64, 64, 128, 3, 1, 1, 1, 64, 128, 32)


@pytest.mark.parametrize("case", CONV_CASES + [EXAMPLE], ids=[str(c) for c in CONV_CASES + [EXAMPLE]])
def test_conv2d_through_im2col_on_gpu(case):
    N, C, H, W, F, K, S, D, P, bm, bn, bk = case
    stages, threads = (3, 256) if case == EXAMPLE else (2, 128)
    k = tilelang.compile(conv_kernel(*case, stages=stages, threads=threads), out_idx=[2], target="cuda")
    a = torch.randn(N, H, W, C, device="cuda").half()
    b = torch.randn(K, K, C, F, device="cuda").half()
    got = k(a, b)
    torch.testing.assert_close(got.float(), conv_ref(a, b, S, P, D), rtol=1e-2, atol=5e-2)

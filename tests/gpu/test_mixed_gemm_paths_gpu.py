"""A shared tile read by a wgmma gemm and an mma.sync gemm of one kernel, on the GPU against torch
(the compile-only twin and the story: tests/cuda/test_mixed_gemm_paths.py)."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_mixed_gemm_paths import mixed_paths, reference  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("two_nests,n", [(True, 64), (False, 64), (True, 128)],
                         ids=["wgmma+mma.sync", "wgmma+wgmma-rs", "panel-rows-all-mma.sync"])
def test_mixed_paths_on_gpu(two_nests, n):
    k = tilelang.compile(mixed_paths(N=n, K=n, two_nests=two_nests), out_idx=[3, 4], target="cuda")
    for _ in range(3):
        a, b = torch.randn(64, n, device="cuda").half(), torch.randn(n, n, device="cuda").half()
        d = torch.rand(n, device="cuda")
        c, e = k(a, b, d)
        rc, re = reference(a, b, d, two_nests)
        torch.testing.assert_close(c, rc, rtol=1e-3, atol=1e-2)
        torch.testing.assert_close(e, re, rtol=1e-2, atol=1e-1)

"""Column-window reads of a fragment (`x_frag[i, jj * 4 + j]`) on the GPU against torch
(compile-only twin: tests/cuda/test_window_reads.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_window_reads import check, sqrsum_gemm  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("tokens,hidden", [(128, 1024), (100, 1280)])
def test_window_reads_on_gpu(tokens, hidden):
    k = tilelang.compile(sqrsum_gemm(tokens, hidden), out_idx=[2, 3], target="cuda", pass_configs={"tc.remapped_fragment_reads": True})
    check(k, tokens, hidden, 24, "cuda")

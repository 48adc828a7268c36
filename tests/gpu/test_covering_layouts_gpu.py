"""A row vector read through a covering layout, on the GPU against torch (compile-only twin:
tests/cuda/test_covering_layouts.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_covering_layouts import check, mla_rs  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dim,seqlen", [(256, 256), (128, 320)])
def test_mla_rs_shape_on_gpu(dim, seqlen):
    k = tilelang.compile(mla_rs(2, 128, seqlen, dim, 64, 64, 64), out_idx=[-1], target="cuda", pass_configs={"tc.remapped_fragment_reads": True})
    check(k, 2, 128, seqlen, dim, 64, "cuda")

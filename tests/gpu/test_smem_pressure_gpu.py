"""The over-budget MLA-shaped kernel on the GPU against torch: compact reduction scratch whose
two reductions share bytes (compile-only twin: tests/cuda/test_smem_pressure.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_smem_pressure import check, mla_fp8  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dim,seqlen", [(512, 320), (480, 256), (128, 256)])  # compact; shared; plain
def test_mla_fp8_shape_on_gpu(dim, seqlen):
    # dim 480: the row-vector scale reads acc_o's rows in another layout (the remapped reads, tc.remapped_fragment_reads)
    k = tilelang.compile(mla_fp8(2, 128, seqlen, dim, 64, 64, 64), out_idx=[-1], target="cuda",
                         pass_configs={"tc.remapped_fragment_reads": dim == 480})
    check(k, 2, 128, seqlen, dim, 64, "cuda")

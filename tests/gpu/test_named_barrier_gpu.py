"""`T.sync_threads(barrier_id, arrive_count)` on the GPU: a prefix sum computed by the first 64
threads of a 256-thread block, synchronising only among themselves on named barrier 3 (a
block-wide barrier there would hang), against torch.cumsum.  Not yet run on hardware when written
(the compile-only twin is tests/cuda/test_named_barrier.py)."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_named_barrier import prefix_sum_first_warps  # noqa: E402

pytestmark = pytest.mark.gpu


def test_named_barrier_prefix_sum_on_gpu():
    k = tilelang.compile(prefix_sum_first_warps(256, 64), out_idx=[-1], target="cuda")
    x = torch.randint(-1000, 1000, (256,), dtype=torch.int32, device="cuda")
    y = k(x)
    ref = x.clone()
    ref[:64] = torch.cumsum(x[:64], 0).to(torch.int32)
    assert torch.equal(y, ref)

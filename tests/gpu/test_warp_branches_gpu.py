"""Branches of whole warps (`if T.get_thread_binding() < 32:` around tile work) on the GPU against
torch, repeated (CPU reference and compile-only checks: tests/cuda/test_warp_branches.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_warp_branches import check_split, split_at_warp  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("split,threads", [(32, 96), (64, 128), (32, 256), (96, 128)])
def test_warp_branches_on_gpu(split, threads):
    k = tilelang.compile(split_at_warp(split=split, threads=threads), target="cuda")
    for _ in range(10):
        check_split(k, device="cuda")


def test_private_tiles_of_branches_running_together_on_gpu():
    import torch
    from test_warp_branches import private_tiles
    k = tilelang.compile(private_tiles(), out_idx=[-1], target="cuda")
    for _ in range(10):
        a, b = torch.randn(64, device="cuda"), torch.randn(64, device="cuda")
        torch.testing.assert_close(k(a, b), torch.cat([a.flip(0), b.flip(0) * 2]))

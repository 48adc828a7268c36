"""T.view on the GPU against torch (compile-only and CPU-target twin: tests/cuda/test_view_reinterpret.py).
The staging kernel also runs a T.Parallel nest whose fragment is indexed at an offset from the loop
variables (transform/shift_parallel_anchors.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_view_reinterpret import (check_global, check_shared, check_stage, gemm_then_stage,  # noqa: E402
                                   global_bytes, shared_bytes)

pytestmark = pytest.mark.gpu


def test_views_on_gpu():
    for _ in range(2):
        check_shared(tilelang.compile(shared_bytes(), out_idx=[1], target="cuda"), "cuda")
        check_global(tilelang.compile(global_bytes(), out_idx=[1, 2], target="cuda"), "cuda")
        check_stage(tilelang.compile(gemm_then_stage(), out_idx=[2], target="cuda"), "cuda")

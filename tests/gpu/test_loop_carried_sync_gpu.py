"""The loop-carried barrier case on the GPU against torch, many times (compile-only twin and CPU
reference: tests/cuda/test_loop_carried_sync.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_loop_carried_sync import check, copy_then_reread  # noqa: E402

pytestmark = pytest.mark.gpu


def test_copy_then_reread_on_gpu():
    k = tilelang.compile(copy_then_reread(), target="cuda")
    for _ in range(20):
        check(k, device="cuda")

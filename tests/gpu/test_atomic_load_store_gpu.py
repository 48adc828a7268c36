"""Ordered loads and stores on the GPU (CPU-target and compile-only twin:
tests/language/test_atomic_load_store.py): the values, and one block handing data to another through
a release store and an acquire load (repeated, fresh data each time)."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from test_atomic_load_store import handoff_program, values_program  # noqa: E402

pytestmark = pytest.mark.gpu


def test_ordered_loads_and_stores_on_gpu():
    x = torch.randn(4, device="cuda")
    c = torch.tensor([2**40, 0], dtype=torch.int64, device="cuda")
    out = torch.zeros(4, device="cuda")
    tilelang.compile(values_program(), target="cuda")(x, c, out)
    assert out.tolist() == [x[0].item(), x[1].item(), (x[2] * 2).item(), 1.0]
    assert c.tolist() == [2**40, 2**40 + 5]


def test_one_block_hands_data_to_another():
    n = 4096
    k = tilelang.compile(handoff_program(n), target="cuda")
    for _ in range(20):
        x = torch.randn(n, device="cuda")
        data = torch.zeros(n, device="cuda")
        flag = torch.zeros(1, dtype=torch.int32, device="cuda")
        out = torch.full((n,), float("nan"), device="cuda")
        got = torch.zeros(1, dtype=torch.int32, device="cuda")
        k(x, data, flag, out, got)
        assert got.item() == 1
        torch.testing.assert_close(out, 3 * x, rtol=0, atol=0)

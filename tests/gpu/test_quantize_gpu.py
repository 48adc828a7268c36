"""tilelang.quantize's converters in a kernel on the GPU against the numpy reference
(compile-only and CPU-target twin: tests/cuda/test_quantize.py)."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_quantize import CASES, reference, unpack  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_converters_on_gpu(case):
    nbits, storage, signed, zero = case
    N, K = 16, 256
    b = torch.randint(-128 if storage == "int8" else 0, 128 if storage == "int8" else 256,
                      (N, K * nbits // 8), dtype=getattr(torch, storage))
    k = tilelang.compile(unpack(N, K, nbits, storage, signed, zero=zero), out_idx=[1], target="cuda")
    out = k(b.cuda()).cpu()
    torch.testing.assert_close(out, torch.from_numpy(reference(b.numpy(), nbits, signed, zero)).half(),
                               rtol=0, atol=0)

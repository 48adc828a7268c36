"""Index arithmetic past 2^31 elements on the GPU (the CPU run: tests/cpu/test_index_width.py; the
sources: tests/cuda/test_index_width_compile.py).  One uint8 tensor of 2^31 + k elements on the
device, changed in place, compared with torch at the start, across the 2^31 boundary, at the end
and at random places."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_index_width import BIG, ODD, _random_big, _samples, add_one_static_tiles, add_one_symbolic  # noqa: E402

pytestmark = pytest.mark.gpu


def _run_in_place_cuda(kernel, add: int, n: int):
    a = _random_big(n).cuda()
    where = _samples(n).cuda()
    before = a[where].clone()
    kernel(a)
    torch.cuda.synchronize()
    want = (before.int() + add).remainder(256).to(torch.uint8)
    bad = (a[where] != want).nonzero()
    assert bad.numel() == 0, f"{bad.numel()} wrong elements, first at index {int(where[bad[0, 0]])}"
    del a
    torch.cuda.empty_cache()


def test_int64_symbolic_extent_past_2_31_elements_on_gpu():
    # the int64 symbol is an int64_t kernel parameter (launch.ParamKind.INT64)
    _run_in_place_cuda(tilelang.compile(add_one_symbolic(), target="cuda"), 3, BIG)


def test_static_shape_past_2_31_elements_through_shared_tiles_on_gpu():
    _run_in_place_cuda(tilelang.compile(add_one_static_tiles(), target="cuda"), 5, ODD)

"""Newer TileLang spellings on the GPU against numpy/torch with fresh random inputs (CPU-target and
compile-only twin: tests/language/test_newer_spellings.py): bitwise tile reductions within a warp and
across warps, and the atomic_addx2 / x4, any_of / all_of, index_to_coordinates, reshape program."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from test_newer_spellings import CASES, _bits, bit_reduce_program, bit_reference, spellings_program  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("kind, dim", CASES)
@pytest.mark.parametrize("shape", [(8, 64), (4, 256)], ids=["8x64", "4x256"])
def test_bit_reductions_on_gpu(kind, dim, shape):
    M, N = shape
    x = _bits(M, N)
    y = torch.empty(M if dim == 1 else N, dtype=torch.int32, device="cuda")
    tilelang.compile(bit_reduce_program(M, N, kind, dim), target="cuda")(x.cuda(), y)
    assert np.array_equal(y.cpu().numpy(), bit_reference(x.numpy(), kind, dim))


def test_newer_spellings_on_gpu():
    M, N = 4, 16
    x = torch.randn(M, N, device="cuda")
    acc = torch.randn(M, N, device="cuda")
    start = acc.clone()
    flags = torch.empty(4, dtype=torch.int32, device="cuda")
    coords = torch.empty(M * N, 2, dtype=torch.int32, device="cuda")
    flat = torch.empty(M * N, device="cuda")
    g = torch.empty(2, dtype=torch.int32, device="cuda")
    tilelang.compile(spellings_program(M, N), target="cuda")(x, acc, flags, coords, flat, g)
    torch.testing.assert_close(acc, start + 2 * x)
    assert flags.tolist() == [1, 0, 0, 1]
    t = torch.arange(M * N)
    assert coords.cpu().tolist() == torch.stack([t // N, t % N], 1).tolist()
    assert torch.equal(flat, x.reshape(-1)) and g.tolist() == [7, 1]

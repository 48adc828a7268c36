"""TileLang's warp-level and smaller builtins on the GPU against torch with fresh random inputs
(compile-only and CPU-target twin: tests/language/test_warp_builtins.py)."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from test_warp_builtins import THREADS, small_builtins_program, warp_program, warp_reference  # noqa: E402

pytestmark = pytest.mark.gpu


def test_shuffles_warp_reductions_and_indices():
    x = torch.randn(THREADS)
    b = torch.randint(-2**31, 2**31 - 1, (THREADS,), dtype=torch.int32)
    out = torch.empty(9, THREADS, device="cuda")
    bits = torch.empty(3, THREADS, dtype=torch.int32, device="cuda")
    idx = torch.empty(3, THREADS, dtype=torch.int32, device="cuda")
    tilelang.compile(warp_program(), target="cuda")(x.cuda(), b.cuda(), out, bits, idx)
    ref_out, ref_bits, ref_idx = warp_reference(x, b)
    torch.testing.assert_close(out[:5].cpu(), ref_out[:5], rtol=0, atol=0)      # shuffles move bits
    torch.testing.assert_close(out[5:8].cpu(), ref_out[5:8], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[8].cpu(), ref_out[8], rtol=0, atol=0)
    assert torch.equal(bits.cpu(), ref_bits) and torch.equal(idx.cpu(), ref_idx)


def test_dp4a_loop_break_ldg_address_of():
    n = 64
    a = torch.randint(-128, 128, (n, 4), dtype=torch.int8)
    b = torch.randint(-128, 128, (n, 4), dtype=torch.int8)
    x = torch.randint(0, 100, (n,), dtype=torch.int32)
    out = torch.empty(n, dtype=torch.int32, device="cuda")
    cnt = torch.empty(3, dtype=torch.int32, device="cuda")
    tilelang.compile(small_builtins_program(n, 95), target="cuda")(a.cuda(), b.cuda(), x.cuda(), out, cnt)
    assert out.cpu().tolist() == ((a.int() * b.int()).sum(1) + 7).tolist()
    first = next((i for i, v in enumerate(x.tolist()) if v >= 95), n)
    assert cnt.cpu().tolist() == [first, int(x[0]), 42]

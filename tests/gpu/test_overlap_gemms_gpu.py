"""The overlapped consumer loop (transform/pipelining/overlap.py) on the GPU against torch: FlashAttention
with two and three stages (K and V on rings of their own; full and causal, D64 and D128, ragged lengths
including one key block, where the overlapped loop runs zero times) and the two-gemm loop (two rings, and
one ring when the second gemm reads K's tile) of the compile-only twin
(tests/cuda/test_overlap_gemms.py), fresh random inputs each time."""
from __future__ import annotations

import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")

import tilecraft as tilelang  # noqa: E402
from tilecraft.kernels import attention  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_overlap_gemms import OVERLAP, two_gemm_loop  # noqa: E402
from test_overlap_gemms_ref import two_gemm_reference  # noqa: E402

pytestmark = pytest.mark.gpu


def _hopper():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the overlapped loop is an sm_90a form")


@pytest.mark.parametrize("seq", [128, 200, 1000, 2048])
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("stages", [2, 3])
def test_flash_attention_overlapped(seq, dim, causal, stages):
    _hopper()
    b, h = 2, 3
    k = tilelang.compile(attention.flash_attention.fn(b, h, seq, dim, is_causal=causal, block_M=128, block_N=128,
                                                      num_stages=stages, threads=256), target="cuda", out_idx=[-1],
                         pass_configs={"tc.warp_specialize": True})
    assert OVERLAP in k.get_plan(), k.get_plan()
    for _ in range(3):
        q, kk, v = (torch.randn(b, seq, h, dim, device="cuda", dtype=torch.half) for _ in range(3))
        qt, kt, vt = (t.transpose(1, 2).double() for t in (q, kk, v))
        s = qt @ kt.transpose(-1, -2) / math.sqrt(dim)
        if causal:
            s = s.masked_fill(~torch.ones(seq, seq, dtype=torch.bool, device="cuda").tril(), float("-inf"))
        ref = (s.softmax(-1) @ vt).transpose(1, 2)
        out = k(q, kk, v).double()
        assert ((out - ref).norm() / ref.norm()).item() < 1e-2


@pytest.mark.parametrize("stages,kv_same", [(2, False), (3, False), (3, True)], ids=["two-rings-2", "two-rings-3",
                                                                                      "one-ring-3"])
def test_two_gemm_loop(stages, kv_same):
    _hopper()
    k = tilelang.compile(two_gemm_loop(1000, stages=stages, kv_same=kv_same), out_idx=[-1], target="cuda",
                         pass_configs={"tc.warp_specialize": True})
    assert OVERLAP in k.get_plan()
    for _ in range(5):
        q, kk, v = (torch.randn(1000, 64, device="cuda", dtype=torch.half) for _ in range(3))
        ref = two_gemm_reference(q, kk, kk if kv_same else v, 128)
        assert ((k(q, kk, v).float() - ref).norm() / ref.norm()).item() < 2e-2

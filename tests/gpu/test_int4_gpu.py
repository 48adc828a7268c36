"""int4 on the GPU (CPU-target twin: tests/cpu/test_int4.py; compile-only: tests/cuda/test_int4_compile.py):
copies sign-extend every nibble, stores wrap and pack two per byte (two blocks writing one byte's two
elements), and T.gemm int4 x int4 accumulates exactly in int32."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_int4 import _gemm, _pack_kernel, _unpack_kernel, pack, rand4, unpack, wrap4  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("col0", [0, 3])
def test_copies_sign_extend_every_nibble_on_gpu(col0):
    M, K, bm, bk = 40, 64, 16, 32 if col0 == 0 else 18
    a = rand4(M, K, seed=col0)
    c = tilelang.compile(_unpack_kernel(M, K, bm, bk, col0), out_idx=-1, target="cuda")(pack(a).cuda())
    assert torch.equal(c.cpu(), a[:, col0:col0 + bk].to(torch.int32))


@pytest.mark.parametrize("bn", [8, 3])
def test_stores_wrap_and_pack_on_gpu(bn):
    x = torch.randint(-40, 40, (5, 12), dtype=torch.int32, generator=torch.Generator().manual_seed(bn))
    y = tilelang.compile(_pack_kernel(5, 12, bn), out_idx=-1, target="cuda")(x.cuda()).cpu()
    assert torch.equal(unpack(y).to(torch.int64), wrap4(x))


@pytest.mark.parametrize("trans_b", [True, False])
@pytest.mark.parametrize("shape,blocks", [((48, 40, 160), (32, 32, 64)), ((256, 256, 512), (32, 32, 64)),
                                          ((1024, 1024, 1024), (128, 128, 64))])   # the last: TileLang's example
def test_gemm_int4_exact_on_gpu(trans_b, shape, blocks):
    """transpose_B=True: mma.sync m16n8k64 .s4 (tc::gemm_ss_s4); False: per-register dot products."""
    M, N, K = shape
    a, b = rand4(M, K, seed=2), rand4(*((N, K) if trans_b else (K, N)), seed=3)
    k = tilelang.compile(_gemm(M, N, K, *blocks, trans_b), out_idx=-1, target="cuda")
    c = k(pack(a).cuda(), pack(b).cuda()).cpu()
    bt = b.to(torch.int32).T if trans_b else b.to(torch.int32)
    assert torch.equal(c, a.to(torch.int32) @ bt)

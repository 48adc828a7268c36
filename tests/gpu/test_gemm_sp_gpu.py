"""`T.gemm_sp` on the GPU against torch, in the tile shapes of TileLang's sparse examples (the
compile-only twin: tests/cuda/test_gemm_sp_compile.py; the smaller shapes of
tests/cpu/test_gemm_sp.py also run here under its `cuda` parameter).  Fresh random semi-sparse A
each time, compressed by `tilecraft.utils.sparse.compress` for this GPU's architecture."""
from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_gemm_sp_compile import CONFIGS, compile_config  # noqa: E402

from tilecraft.utils.sparse import compress, decompress, randn_semi_sparse  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", list(CONFIGS))
def test_gemm_sp_on_gpu_matches_torch(name):
    M, N, K, bm, bn, bk, meta, stages, accum, out, threads, policy = CONFIGS[name]
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}" + ("a" if major >= 9 else "")
    meta_arch = "9.0" if meta == "uint8" else "8.0"   # compress() makes uint8 E for sm_90, int16 for sm_8x
    k = compile_config(name, arch)
    for _ in range(2):
        a = randn_semi_sparse(M, K, dtype=torch.float16, device="cuda")
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        s, e = compress(a, transposed=False, arch=meta_arch, block_k=bk)
        assert torch.equal(decompress(s, e), a)
        c = k(s, e, b)
        ref = a.float() @ b.float()
        if accum == "float16":   # a float16 running sum over K=1024: rounding grows with the sum (0.8% on the CPU)
            assert (c.float() - ref).abs().max() <= 2e-2 * ref.abs().max()
        else:
            torch.testing.assert_close(c.float(), ref, rtol=1e-2, atol=1e-2)

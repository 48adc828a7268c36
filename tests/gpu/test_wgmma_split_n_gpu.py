"""tests/cpu/test_wgmma_split_n.py's programs on the GPU (sm_90a: the warpgroups split N on wgmma),
against torch with fresh random inputs."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_wgmma_split_n import check, split_gemm  # noqa: E402

pytestmark = pytest.mark.sm90


@pytest.mark.parametrize("trans_B", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M,N,K,block_M,block_N,threads", [(192, 512, 320, 64, 128, 256),
                                                          (256, 512, 256, 128, 128, 512),
                                                          (128, 256, 128, 64, 256, 256)])
def test_split_n_gemms_match_torch(trans_B, dtype, M, N, K, block_M, block_N, threads):
    k = tilelang.compile(split_gemm(M, N, K, block_M=block_M, block_N=block_N, threads=threads, trans_B=trans_B,
                                    dtype=dtype), target="cuda")
    assert "along N" in k.get_plan(), k.get_plan()
    check(k, M, N, K, block_N, trans_B, dtype, device="cuda")

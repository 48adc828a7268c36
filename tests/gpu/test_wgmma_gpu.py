"""GPU tier for the opt-in Hopper path (`pass_configs={"tc.use_wgmma": True}`, sm_90a only):
generated wgmma GEMMs against torch on fresh random inputs, ragged sizes included; synchronous and
with one wgmma group kept in flight across the main loop (`tc.wgmma_async`, checked on the H200),
and with that loop's tiles loaded by TMA (`tc.use_tma`, written in session 3 without GPU time
left: its first hardware run is these tests; ragged M/N/K exercise the TMA zero fill)."""
import pytest
import torch

import tilecraft as tilelang
from tilecraft.kernels import gemm

pytestmark = pytest.mark.gpu


def _hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.skipif(not _hopper(), reason="needs an sm_90 GPU")
@pytest.mark.parametrize("m,n,k", [(1024, 1024, 1024), (1000, 776, 520), (256, 512, 4096)])
@pytest.mark.parametrize("cfg", [dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256),
                                 dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256),
                                 dict(block_M=64, block_N=128, block_K=32, num_stages=2, threads=128)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mode", ["sync", "async", "tma"])
def test_wgmma_gemm_matches_torch(m, n, k, cfg, dtype, mode):
    name = "float16" if dtype == torch.float16 else "bfloat16"
    kern = tilelang.compile(gemm.matmul.fn(m, n, k, dtype=name, **cfg), out_idx=[-1],
                            target={"kind": "cuda", "arch": "sm_90a"},
                            pass_configs={"tc.use_wgmma": True, "tc.wgmma_async": mode != "sync",
                                          "tc.use_tma": mode == "tma"})
    assert ("tma" in kern.artifact.meta) == (mode == "tma"), "the TMA main loop is the one under test"
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    kern(a, b, c)
    ref = a.double() @ b.double()
    rel = ((c.double() - ref).norm() / ref.norm()).item()
    assert rel < 1e-2, f"relative error {rel:.3e}"

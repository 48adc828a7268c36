"""GPU tier for the Hopper path (the default on sm_90a; each mode pinned here by its pass_configs):
generated wgmma GEMMs against torch on fresh random inputs, ragged sizes included; synchronous and
with one wgmma group kept in flight across the main loop (`tc.wgmma_async`, checked on the H200),
and with that loop's tiles loaded by TMA (`tc.use_tma`, written in session 3 without GPU time
left: its first hardware run is these tests; ragged M/N/K exercise the TMA zero fill)."""
import pytest
import torch

import tilecraft as tilelang
from tilecraft.kernels import gemm

pytestmark = pytest.mark.gpu


@pytest.mark.sm90
@pytest.mark.parametrize("m,n,k", [(1024, 1024, 1024), (1000, 776, 520), (256, 512, 4096)])
@pytest.mark.parametrize("cfg", [dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256),
                                 dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256),
                                 dict(block_M=64, block_N=128, block_K=32, num_stages=2, threads=128)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mode", ["sync", "async", "tma", "ws"])
def test_wgmma_gemm_matches_torch(m, n, k, cfg, dtype, mode):
    """Modes: synchronous wgmma; one group in flight (cp.async loads); TMA loads; warp-specialized
    (a producer warpgroup issues the TMA loads, the default on sm_90a)."""
    name = "float16" if dtype == torch.float16 else "bfloat16"
    kern = tilelang.compile(gemm.matmul.fn(m, n, k, dtype=name, **cfg), out_idx=[-1],
                            target={"kind": "cuda", "arch": "sm_90a"},
                            pass_configs={"tc.use_wgmma": True, "tc.wgmma_async": mode != "sync",
                                          "tc.use_tma": mode in ("tma", "ws"), "tc.warp_specialize": mode == "ws"})
    assert ("tma" in kern.artifact.meta) == (mode in ("tma", "ws")), "the TMA main loop is the one under test"
    split = f"if (tc_tid >= {cfg['threads']})" in kern.get_kernel_source()
    assert split == (mode == "ws"), "the warp-specialized loop is the one under test"
    assert kern.artifact.meta["block"][0] == cfg["threads"] + (128 if mode == "ws" else 0)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    kern(a, b, c)
    ref = a.double() @ b.double()
    rel = ((c.double() - ref).norm() / ref.norm()).item()
    assert rel < 1e-2, f"relative error {rel:.3e}"


@pytest.mark.sm90
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("s,d,cfg", [(200, 128, dict(block_M=128, block_N=128, num_stages=2, threads=256)),
                                     (512, 128, dict(block_M=128, block_N=128, num_stages=2, threads=256)),
                                     (200, 64, dict(block_M=64, block_N=64, num_stages=1, threads=128))])
@pytest.mark.parametrize("ws", [False, True], ids=["tma", "ws"])
def test_flash_attention_on_wgmma_matches_torch(s, d, cfg, causal, ws):
    """FlashAttention with `tc.use_wgmma`: Q @ K^T on tc::gemm_ss_sm90 and P @ V on tc::gemm_rs_sm90 (P
    from the S accumulator's registers).  Written in session 3 without GPU time: first run here."""
    import math
    from tilecraft.kernels import attention
    b, h = 1, 3
    kern = tilelang.compile(attention.flash_attention.fn(b, h, s, d, is_causal=causal, **cfg),
                            target={"kind": "cuda", "arch": "sm_90a"},
                            pass_configs={"tc.use_wgmma": True, "tc.warp_specialize": ws})
    src = kern.get_kernel_source()
    assert "gemm_ss_sm90" in src and "gemm_rs_sm90" in src, "both gemms on wgmma"
    assert ("warp-specialized" in kern.get_plan()) == (ws and cfg["num_stages"] >= 2)
    q, k, v = (torch.randn(b, s, h, d, device="cuda").half() for _ in range(3))
    o = torch.full((b, s, h, d), float("nan"), device="cuda").half()
    kern(q, k, v, o)
    qt, kt, vt = (t.transpose(1, 2).double() for t in (q, k, v))
    scores = qt @ kt.transpose(-1, -2) / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(~torch.ones(s, s, dtype=torch.bool, device="cuda").tril(), float("-inf"))
    ref = (scores.softmax(-1) @ vt).transpose(1, 2)
    rel = ((o.double() - ref).norm() / ref.norm()).item()
    assert rel < 1e-2, f"relative error {rel:.3e}"

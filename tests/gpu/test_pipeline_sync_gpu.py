"""Both main-loop synchronisation forms of pipelined GEMMs on the GPU (transform/pipeline_copies.py,
device/include/tilecraft/pipeline.h): the block barrier inside tc::gemm_ss and the per-stage
mbarrier pipeline, each forced through `tc.mbarrier_pipeline`, at shapes that stress the phase
bookkeeping: one k-tile (fewer tiles than stages), exactly `stages` tiles, many tiles, ragged M/N/K
(the last k-tile zero-filled), transposed operands, bf16.  Fresh random inputs; the output starts
as NaN; relative Frobenius error against a float32 torch matmul."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tilecraft as tilelang  # noqa: E402
from tilecraft.kernels import gemm  # noqa: E402

pytestmark = pytest.mark.gpu

SHAPES = [(256, 512, 64), (256, 512, 192), (512, 512, 1024), (200, 300, 130), (130, 260, 1000)]
TILES = [dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256),
         dict(block_M=64, block_N=64, block_K=32, num_stages=4, threads=128)]


@pytest.mark.parametrize("mbarrier", [True, False], ids=["mbarrier", "block-barrier"])
@pytest.mark.parametrize("tiles", TILES, ids=lambda t: f"{t['block_M']}x{t['block_N']}x{t['block_K']}/{t['num_stages']}")
@pytest.mark.parametrize("mnk", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_pipelined_gemm_matches_torch(mnk, tiles, mbarrier):
    m, n, k = mnk
    f = gemm.matmul.fn(m, n, k, **tiles)
    # the mma.sync loop forms (on Hopper too: wgmma off), with per-stage mbarriers or a block barrier
    kern = tilelang.compile(f, out_idx=[-1], target="cuda",
                            pass_configs={"tc.mbarrier_pipeline": mbarrier, "tc.use_wgmma": False})
    assert ("pipe_bar" in kern.get_kernel_source()) == mbarrier
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    kern(a, b, c)
    ref = a.float() @ b.float()
    err = ((c.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < 1e-2, f"relative error {err:.2e}"


@pytest.mark.parametrize("trans", [(True, False), (False, True)], ids=["tA", "tB"])
def test_mbarrier_pipeline_transposed_bf16(trans):
    ta, tb = trans
    m, n, k = 256, 256, 320
    f = gemm.matmul.fn(m, n, k, 128, 256, 64, num_stages=3, threads=256, trans_A=ta, trans_B=tb, dtype="bfloat16")
    kern = tilelang.compile(f, out_idx=[-1], target="cuda", pass_configs={"tc.mbarrier_pipeline": True})
    a = torch.randn(*((k, m) if ta else (m, k)), device="cuda", dtype=torch.bfloat16)
    b = torch.randn(*((n, k) if tb else (k, n)), device="cuda", dtype=torch.bfloat16)
    out = kern(a, b)
    ref = gemm.ref_matmul(a, b, ta, tb)
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < 1e-2, f"relative error {err:.2e}"

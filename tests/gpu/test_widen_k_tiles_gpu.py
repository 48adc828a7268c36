"""widen_k_tiles on the GPU (sm_90a): GEMMs whose 64-byte k-tiles the compiler widens to 128 bytes,
against torch with fresh random inputs, including a ragged K (the last widened tile half out of range,
zero-filled by TMA), transposed operands and bf16; and the same program with the switch off gives the
same bits (the same sums in the same k order).  Compile-only twin: tests/cuda/test_widen_k_tiles.py."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tilecraft as tilelang  # noqa: E402
from tilecraft.kernels.gemm import matmul  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("M,N,K,trans_a,trans_b,dtype", [
    (1024, 1024, 1024, False, False, "float16"),
    (1000, 520, 1000, False, False, "float16"),
    (512, 768, 640, True, False, "float16"),
    (768, 512, 320, False, True, "bfloat16"),
    (130, 250, 960, True, True, "float16"),
])
def test_widened_gemm_matches_torch(M, N, K, trans_a, trans_b, dtype):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("widen_k_tiles applies to the sm_90a TMA + wgmma loop")
    func = matmul.get_tir(M, N, K, trans_A=trans_a, trans_B=trans_b, dtype=dtype)
    unsplit = {"tc.warp_specialize": False}   # by default the loop splits as two blocks per SM, unwidened
    wide = tilelang.compile(func, out_idx=[-1], target="cuda", pass_configs=unsplit)
    assert "widened" in wide.get_plan()
    tdt = getattr(torch, dtype)
    a = torch.randn((K, M) if trans_a else (M, K), device="cuda", dtype=tdt)
    b = torch.randn((N, K) if trans_b else (K, N), device="cuda", dtype=tdt)
    ref = (a.float().T if trans_a else a.float()) @ (b.float().T if trans_b else b.float())
    got = wide(a, b).float()
    assert ((got - ref).norm() / ref.norm()).item() < (1e-2 if dtype == "bfloat16" else 2e-3)
    narrow = tilelang.compile(func, out_idx=[-1], target="cuda", pass_configs={"tc.widen_k_tiles": False, **unsplit})
    assert "widened" not in narrow.get_plan()
    assert torch.equal(wide(a, b), narrow(a, b))
    # the default: split as two blocks per SM over the same k-tiles, the same sums in the same order
    # (when both tensors' rows are whole 16-byte units, so the loop loads by TMA; else it stays widened)
    split = tilelang.compile(func, out_idx=[-1], target="cuda")
    tma = all((cols * tdt.itemsize) % 16 == 0 for cols in (M if trans_a else K, K if trans_b else N))
    assert ("two blocks per SM" in split.get_plan()) == tma and ("widened" in split.get_plan()) != tma, split.get_plan()
    assert torch.equal(split(a, b), narrow(a, b) if tma else wide(a, b))

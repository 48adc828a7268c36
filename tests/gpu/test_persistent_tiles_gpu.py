"""Persistent tiles on the GPU (sm_90a, transform/pipelining/persistent.py): GEMMs whose blocks walk the
grid's tiles with a TMA ring running across tiles, against torch with fresh random inputs -- a tile
count P does not divide (the walk's guard), ragged M and N (TMA zero fill, guarded epilogue), a main
loop exactly as long as the ring (n == S: the first refill already targets the next tile), launch
order and panel order, transposed bf16, the GELU epilogue at the benchmark's shape; and the walked
kernel gives the same bits as the launched-per-tile one (the same sums in the same order).
Compile-only twin: tests/cuda/test_persistent_tiles.py."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tilecraft as tilelang  # noqa: E402
from tilecraft.kernels.gemm import matmul, matmul_bias_gelu, ref_matmul_bias_gelu  # noqa: E402

pytestmark = pytest.mark.gpu
ON, OFF = {"tc.persistent_tiles": True}, {"tc.persistent_tiles": False}


def _hopper():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("persistent tiles apply to the sm_90a TMA + wgmma loop")


@pytest.mark.parametrize("M,N,K,trans_b,dtype,swizzle", [
    (2176, 4352, 192, False, "float16", True),     # 17 x 17 = 289 tiles over 132 blocks; n == S == 3
    (2000, 4000, 320, False, "float16", True),     # ragged M and N
    (2048, 4096, 256, True, "bfloat16", False),    # transposed B, launch order
    (4096, 2048, 1024, False, "float16", False),
])
def test_walked_gemm_matches_torch(M, N, K, trans_b, dtype, swizzle):
    _hopper()
    func = matmul.get_tir(M, N, K, 128, 256, 64, 3, 256, trans_B=trans_b, dtype=dtype, use_swizzle=swizzle)
    walked = tilelang.compile(func, out_idx=[-1], target="cuda", pass_configs=ON)
    assert "persistent" in walked.get_plan()
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn((N, K) if trans_b else (K, N), device="cuda", dtype=tdt)
    ref = a.float() @ (b.float().T if trans_b else b.float())
    got = walked(a, b)
    assert ((got.float() - ref).norm() / ref.norm()).item() < (1e-2 if dtype == "bfloat16" else 2e-3)
    launched = tilelang.compile(func, out_idx=[-1], target="cuda", pass_configs=OFF)
    assert "persistent" not in launched.get_plan()
    assert torch.equal(got, launched(a, b))


def test_gelu_at_the_benchmark_shape_walks_by_default():
    _hopper()
    M, N, K = 8192, 8192, 2048
    kern = matmul_bias_gelu(M, N, K, 128, 256, 64, 3, 256)
    assert "persistent" in kern.get_plan()
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    bias = torch.randn(N, device="cuda", dtype=torch.float16)
    got = kern(a, b, bias).float()
    ref = ref_matmul_bias_gelu(a, b, bias).float()
    assert ((got - ref).norm() / ref.norm()).item() < 2e-3
    for _ in range(3):   # repeated launches reuse the ring's barriers from a fresh state each time
        assert torch.equal(kern(a, b, bias).float(), got)

"""The reference kernels of `tilecraft.kernels` at ragged, non-power-of-two sizes on every target
(see conftest.py), against their torch references; and the profiler calls a user makes on them."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.kernels as K


def rel_err(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-12)).item()


def test_vector_add_ragged_length(build, device):
    a, b = torch.randn(1000, device=device), torch.randn(1000, device=device)
    k = build(K.vector_add, 1000, block_N=384)  # 1000 is not a multiple of the block
    torch.testing.assert_close(k(a, b), K.ref_vector_add(a, b), rtol=0, atol=0)


def test_axpby_ragged_2d_float16(build, device):
    x, y = torch.randn(45, 300, device=device).half(), torch.randn(45, 300, device=device).half()
    z = build(K.axpby, 45, 300, alpha=1.5, beta=-2.0, block_M=16, block_N=128)(x, y)
    torch.testing.assert_close(z, K.ref_axpby(x, y, 1.5, -2.0), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("trans_A,trans_B", [(False, False), (False, True), (True, False), (True, True)])
def test_matmul_ragged_77x53x40_with_64x64x32_tiles(build, device, trans_A, trans_B):
    M, N, Kd = 77, 53, 40
    a = torch.randn((Kd, M) if trans_A else (M, Kd), device=device).half()
    b = torch.randn((N, Kd) if trans_B else (Kd, N), device=device).half()
    k = build(K.matmul, M, N, Kd, 64, 64, 32, trans_A=trans_A, trans_B=trans_B)
    c = k(a, b)
    assert c.shape == (M, N) and c.dtype == torch.float16
    torch.testing.assert_close(c, K.ref_matmul(a, b, trans_A, trans_B), rtol=2e-3, atol=2e-2)


def test_matmul_bfloat16_ragged(build, device):
    a, b = torch.randn(50, 70, device=device).bfloat16(), torch.randn(70, 33, device=device).bfloat16()
    c = build(K.matmul, 50, 33, 70, 32, 32, 32, dtype="bfloat16")(a, b)
    assert c.dtype == torch.bfloat16
    assert rel_err(c, a.float() @ b.float()) < 1e-2


def test_matmul_bias_gelu_ragged(build, device):
    M, N, Kd = 70, 45, 50
    a = torch.randn(M, Kd, device=device).half() / Kd ** 0.25
    b = torch.randn(Kd, N, device=device).half() / Kd ** 0.25
    bias = torch.randn(N, device=device).half()
    out = build(K.matmul_bias_gelu, M, N, Kd, 32, 32, 16)(a, b, bias)
    assert rel_err(out, K.ref_matmul_bias_gelu(a, b, bias)) < 5e-3


def test_splitk_matmul_atomic_accumulation(build, device):
    M, N, Kd = 50, 40, 128
    a, b = torch.randn(M, Kd, device=device).half(), torch.randn(Kd, N, device=device).half()
    c = torch.zeros(M, N, device=device)
    build(K.splitk_matmul, M, N, Kd, split_k=4, block_M=32, block_N=32, block_K=16)(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-3)


def test_softmax_37x1000(build, device):
    x = torch.randn(37, 1000, device=device).half() * 3
    y = build(K.softmax, 37, 1000)(x)
    torch.testing.assert_close(y, K.ref_softmax(x), rtol=2e-3, atol=1e-4)
    torch.testing.assert_close(y.float().sum(1), torch.ones(37, device=device), rtol=0, atol=5e-3)


def test_rmsnorm_bfloat16_ragged_rows(build, device):
    x, w = torch.randn(37, 300, device=device).bfloat16(), torch.randn(300, device=device).bfloat16()
    y = build(K.rmsnorm, 37, 300, block_M=4)(x, w)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y, K.ref_rmsnorm(x, w), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_seq200(build, device, causal):
    B, H, S, D = 1, 2, 200, 32
    q, k, v = (torch.randn(B, S, H, D, device=device).half() for _ in range(3))
    o = build(K.flash_attention, B, H, S, D, is_causal=causal, block_M=64, block_N=64)(q, k, v)
    ref = K.ref_attention(q, k, v, is_causal=causal)
    assert o.shape == (B, S, H, D)
    assert rel_err(o, ref) < 1e-2
    torch.testing.assert_close(o, ref, rtol=2e-2, atol=2e-2)


def test_flash_attention_causal_first_row_attends_only_to_itself(build, device):
    B, H, S, D = 1, 1, 70, 16
    q, k, v = (torch.randn(B, S, H, D, device=device).half() for _ in range(3))
    o = build(K.flash_attention, B, H, S, D, is_causal=True, block_M=32, block_N=32)(q, k, v)
    torch.testing.assert_close(o[0, 0], v[0, 0], rtol=1e-3, atol=1e-3)


# ---- profiler --------------------------------------------------------------------------------

profiler = pytest.importorskip("tilecraft.profiler", reason="tilecraft.profiler is not importable yet")


@pytest.fixture
def small_matmul(build):
    return build(K.matmul, 77, 53, 40, 64, 64, 32)


def test_profiler_assert_allclose_normal_supply(small_matmul):
    prof = small_matmul.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    prof.assert_allclose(lambda a, b: a @ b, rtol=1e-2, atol=1e-2)


def test_profiler_assert_allclose_catches_a_wrong_reference(small_matmul):
    prof = small_matmul.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    with pytest.raises(AssertionError):
        prof.assert_allclose(lambda a, b: a @ b + 1.0, rtol=1e-2, atol=1e-2)


def test_profiler_do_bench_returns_positive_ms(small_matmul):
    prof = small_matmul.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    ms = prof.do_bench(warmup=1, rep=5)
    assert isinstance(ms, float) and 0 < ms < 5000
    ref_ms = prof.do_bench(lambda a, b: a @ b, warmup=1, rep=5)
    assert ref_ms > 0


def test_profiler_on_softmax_auto_supply(build):
    k = build(K.softmax, 37, 1000)
    k.get_profiler().assert_allclose(K.ref_softmax, rtol=1e-2, atol=1e-2)

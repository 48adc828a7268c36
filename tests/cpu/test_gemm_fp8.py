"""FP8 e4m3 GEMMs (tilecraft.kernels.gemm_fp8) on the CPU target against torch's dequantized fp32 product,
at ragged M, N and K (K not a multiple of the 128-deep scale group): per-tensor scales and DeepSeek's
1x128 / 128x128 block scales, fp32 and bf16 out.  The sm_90a plans (fp8 wgmma) are checked in
tests/cuda/test_new_kernels_sm90.py, the GPU run in tests/gpu/test_new_kernels_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
from tilecraft.kernels import gemm_fp8 as G


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    assert torch.isfinite(out).all()
    return ((out - ref).norm() / ref.norm()).item()


def cpu(factory, *args, **kwargs):
    return tilelang.compile(factory.fn(*args, **kwargs), out_idx=[-1], target="cpu")


TOL = {"float32": 1e-6, "bfloat16": 5e-3}


@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_per_tensor_scales(out_dtype):
    M, N, K = 100, 72, 200
    a, b = torch.randn(M, K) * 3, torch.randn(N, K) * 0.2
    qa, sa = G.quantize_fp8_per_tensor(a)
    qb, sb = G.quantize_fp8_per_tensor(b)
    c = cpu(G.fp8_matmul, M, N, K, block_M=64, block_N=64, out_dtype=out_dtype)(qa, qb, sa, sb)
    assert c.dtype == getattr(torch, out_dtype) and c.shape == (M, N)
    assert rel_err(c, G.ref_fp8_matmul(qa, qb, sa, sb)) < TOL[out_dtype]
    assert rel_err(c, a @ b.t()) < 0.1   # the quantization's own error, for scale


@pytest.mark.parametrize("k_blocks", [1, 2])   # 2: two scale groups a stage, the second past K at the end
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
def test_deepseek_block_scales(out_dtype, k_blocks):
    M, N, K = 130, 200, 300   # 2 weight-scale rows (the second partial), 3 k-groups (the last partial)
    a = torch.randn(M, K) * torch.logspace(-2, 2, M)[:, None]   # rows of very different ranges
    b = torch.randn(N, K) * torch.logspace(1, -1, N)[:, None]
    qa, sa = G.quantize_fp8_activations(a)
    qb, sb = G.quantize_fp8_blocks(b, 128)
    assert sa.shape == (3, M) and sb.shape == (2, 3)
    c = cpu(G.fp8_matmul_blockscaled, M, N, K, block_M=64, block_N=64, out_dtype=out_dtype,
            k_blocks=k_blocks)(qa, qb, sa, sb)
    assert rel_err(c, G.ref_fp8_matmul_blockscaled(qa, qb, sa, sb)) < TOL[out_dtype]
    assert rel_err(c, a @ b.t()) < 0.1


def test_blockscaled_refuses_a_block_wider_than_a_weight_scale():
    with pytest.raises(ValueError, match="block_N=256 must divide 128"):
        G.fp8_matmul_blockscaled.fn(256, 256, 256, block_N=256)

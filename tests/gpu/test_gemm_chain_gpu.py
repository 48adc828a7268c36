"""A float32 `T.gemm` (no tensor-core path: the CUDA target's fallback, `acc + a * b` per k, which NVRTC
contracts into FFMA) gives the CPU target's chain of fused multiply-adds bit for bit (README "The CPU
target"; the CPU side: tests/cpu/test_gemm_exact_chain.py)."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_gemm_exact_chain import gemm_kernel, inputs  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("M,N,K", [(64, 64, 128), (37, 50, 96)])
def test_float32_gemm_on_cuda_is_the_cpu_targets_chain(M, N, K):
    g = torch.Generator().manual_seed(M + N + K)
    a, b = inputs((M, K), "float32", g), inputs((K, N), "float32", g)
    c_cpu = torch.empty(M, N)
    tilelang.compile(gemm_kernel(M, N, K, "float32", False), target="cpu")(a, b, c_cpu)
    c_gpu = torch.empty(M, N, device="cuda")
    tilelang.compile(gemm_kernel(M, N, K, "float32", False), target="cuda")(a.cuda(), b.cuda(), c_gpu)
    assert torch.equal(c_gpu.cpu(), c_cpu), (c_gpu.cpu() - c_cpu).abs().max()

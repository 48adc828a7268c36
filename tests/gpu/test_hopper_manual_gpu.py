"""The fully specialized form of a hand-written Hopper GEMM on the GPU (each warp group runs its
whole role, its own loop included, after T.set_max_nreg), against torch on fresh random inputs.
The CPU target refuses this program (its roles wait on each other's later iterations), so it is
not in the every-target tier; its compile-only checks are tests/cuda/test_hopper_manual_sass.py.
The branch-per-iteration programs of tests/cpu/test_hopper_manual.py run on the GPU through that
tier's `cuda` parameter.  Not yet run on hardware when written."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_hopper_manual import gemm_roles  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.sm90]


@pytest.mark.parametrize("M,N,K", [(256, 256, 512), (200, 136, 320)])
def test_roles_gemm_with_setmaxnreg_on_gpu(M, N, K):
    k = tilelang.compile(gemm_roles.fn(M, N, K, 128, 128, 64), out_idx=[2], target="cuda")
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    c = k(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_thread_index_roles_on_gpu():
    """Three warp groups by `if tx ...`: two consumers (C = A @ B, D = (A @ B) / 2) fed by a
    producer that stores elements itself and arrives with T.cp_async_barrier_noinc."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
    from test_hopper_manual_sass import roles_by_thread_index
    M, N, K = 192, 256, 320
    k = tilelang.compile(roles_by_thread_index(M, N, K), out_idx=[2, 3], target="cuda")
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    c, d = k(a, b)
    ref = a.float() @ b.float()
    torch.testing.assert_close(c.float(), ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(d.float(), ref / 2, rtol=1e-2, atol=1e-2)

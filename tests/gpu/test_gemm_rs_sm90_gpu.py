"""tc::gemm_rs_sm90 (wgmma with A from registers) on a Hopper GPU: each driver kernel of
tests/cuda/gemm_sm90_src.py::rs_cases loads A [M][K] into registers in the documented layout
(FlashAttention's P straight from an accumulator), B into swizzled shared memory, and must give
C + A @ op(B) as torch computes it in float64.

Written without GPU time (session 3): compiled and SASS-checked in CI
(tests/cuda/test_gemm_rs_sm90_header.py), not yet run on hardware.  If it fails while
test_gemm_sm90_header_gpu.py passes, the A register fragment order is the suspect (gemm_sm90.h,
gemm_rs_sm90: {pack(nk=2kk, h=0), pack(2kk, 1), pack(2kk+1, 0), pack(2kk+1, 1)})."""
from __future__ import annotations

import functools
import os
import sys

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))
from gemm_sm90_src import rs_cases, rs_module_source, rs_name  # noqa: E402

CASES = rs_cases()
TORCH_DTYPE = {"f16": torch.float16, "bf16": torch.bfloat16}


@functools.lru_cache(maxsize=None)
def _functions() -> dict:
    from tilecraft.compiler import compile_cuda_nvrtc
    from tilecraft.runtime.cuda_driver import CudaModule
    mod = CudaModule(compile_cuda_nvrtc(rs_module_source(CASES), "sm_90a").cubin)
    return {rs_name(c): mod.function(rs_name(c)) for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=[rs_name(c) for c in CASES])
def test_gemm_rs_sm90_matches_torch(case):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a compute capability 9.0 GPU (wgmma is sm_90a only)")
    dt = TORCH_DTYPE[case.dtype]
    a = torch.randn(case.M, case.K, device="cuda").to(dt)
    b_st = torch.randn(*case.b_stored, device="cuda").to(dt)
    c0 = torch.randn(case.M, case.N, device="cuda")
    c = c0.clone()
    info = torch.full((2,), -1, dtype=torch.int32, device="cuda")
    _functions()[rs_name(case)].launch((1, 1, 1), (case.threads, 1, 1), 0, torch.cuda.current_stream().cuda_stream,
                                       [("ptr", a.data_ptr()), ("ptr", b_st.data_ptr()), ("ptr", c.data_ptr()),
                                        ("ptr", info.data_ptr())])
    torch.cuda.synchronize()
    assert info.tolist() == [0, 0], "B's shared tile is not 1024-aligned"
    b = b_st.T if case.trans_b else b_st
    torch.testing.assert_close(c.double(), c0.double() + a.double() @ b.double(), rtol=1e-4, atol=1e-3)

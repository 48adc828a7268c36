"""tilecraft/gemm_sm80.h on the GPU: one small driver kernel per configuration (see
tests/cuda/gemm_header_src.py) loads A/B tiles into shared memory (swizzled when SWZ=1), zeroes C,
calls tc::gemm_ss / tc::gemm_rs and writes C back through the documented register-slot mapping;
the result must match torch.  Also checks tc::swizzle_offset against the Python model.
(Named *_gpu so its basename differs from tests/cuda/test_gemm_header.py: tests/ has no packages.)"""
from __future__ import annotations

import functools
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))
from gemm_header_src import all_cases, module_source, swizzle_offset  # noqa: E402

CASES = all_cases()
TORCH_DTYPE = {"f16": torch.float16, "bf16": torch.bfloat16}


def _arch() -> str:
    from tilecraft.runtime.cuda_driver import device_properties
    return device_properties(torch.cuda.current_device()).arch


@functools.lru_cache(maxsize=None)
def _functions() -> dict:
    """Compile all cases (in a few NVRTC modules, in parallel) and return name -> function."""
    from tilecraft.compiler import compile_cuda_nvrtc
    from tilecraft.runtime.cuda_driver import CudaModule
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("needs sm_80+")
    arch = _arch()
    n = min(8, os.cpu_count() or 1)
    groups = [CASES[i::n] for i in range(n)]
    with ThreadPoolExecutor(n) as ex:
        binaries = list(ex.map(lambda cs: compile_cuda_nvrtc(module_source(cs), arch), groups))
    fns = {}
    for cs, b in zip(groups, binaries):
        mod = CudaModule(b.cubin)
        for c in cs:
            fns[c.name] = mod.function(c.name)
    return fns


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gemm_matches_torch(case):
    fn = _functions()[case.name]
    dt = TORCH_DTYPE[case.dtype]
    a_st = torch.randn(*case.a_stored, device="cuda").to(dt)
    b_st = torch.randn(*case.b_stored, device="cuda").to(dt)
    c = torch.full((case.M, case.N), float("nan"), device="cuda")
    fn.launch((1, 1, 1), (case.threads, 1, 1), 0, torch.cuda.current_stream().cuda_stream,
              [("ptr", a_st.data_ptr()), ("ptr", b_st.data_ptr()), ("ptr", c.data_ptr())])
    a = a_st.T if case.trans_a and not case.rs else a_st
    b = b_st.T if case.trans_b else b_st
    ref = a.double() @ b.double()
    torch.testing.assert_close(c.double(), ref, rtol=1e-4, atol=1e-3)


SWZ_SRC = r"""
#include <tilecraft/tilecraft.h>
template <int L, int EB>
__device__ void table(int* out, int rows) {
  for (int i = threadIdx.x; i < rows * L; i += blockDim.x) out[i] = tc::swizzle_offset<L, EB>(i / L, i % L);
}
extern "C" __global__ void swz(int* out) {
  int o = 0;
  table<8, 2>(out + o, 16); o += 16 * 8;
  table<16, 2>(out + o, 16); o += 16 * 16;
  table<32, 2>(out + o, 16); o += 16 * 32;
  table<48, 2>(out + o, 16); o += 16 * 48;
  table<64, 2>(out + o, 16); o += 16 * 64;
  table<96, 2>(out + o, 16); o += 16 * 96;
  table<128, 2>(out + o, 16); o += 16 * 128;
  table<32, 4>(out + o, 16); o += 16 * 32;
}
"""
SWZ_TABLES = [(8, 2), (16, 2), (32, 2), (48, 2), (64, 2), (96, 2), (128, 2), (32, 4)]


def test_swizzle_offset_matches_python_model():
    from tilecraft.compiler import compile_cuda_nvrtc
    from tilecraft.runtime.cuda_driver import CudaModule
    fn = CudaModule(compile_cuda_nvrtc(SWZ_SRC, _arch()).cubin).function("swz")
    total = sum(16 * L for L, _ in SWZ_TABLES)
    out = torch.full((total,), -1, dtype=torch.int32, device="cuda")
    fn.launch((1, 1, 1), (128, 1, 1), 0, torch.cuda.current_stream().cuda_stream,
              [("ptr", out.data_ptr())])
    got = out.cpu().tolist()
    expect = [swizzle_offset(L, eb, i // L, i % L) for L, eb in SWZ_TABLES for i in range(16 * L)]
    assert got == expect

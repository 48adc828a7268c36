"""tilecraft/gemm_sm90.h on a Hopper GPU (sm_90a): one small driver kernel per configuration (see
tests/cuda/gemm_sm90_src.py) stores A/B tiles in 1024-byte-aligned shared memory with
tc::swizzle_offset_sm90, fences the async proxy, loads C through the documented register-slot
mapping, calls tc::gemm_ss_sm90 (REPS times) and writes C back through the same mapping; the result
must equal C + REPS * op(A) @ op(B) computed by torch in float64.  Also checks
tc::swizzle_offset_sm90 against the Python model on the device.
(Named *_gpu so its basename differs from tests/cuda/test_gemm_sm90_header.py.)

Written without GPU time: every case compiles and its descriptors are checked against the PTX
canonical layouts in tests/cuda/test_gemm_sm90_header.py, but none has run on hardware yet.  If
they fail, first look at: test_shared_tiles_are_1024_aligned (the layout needs it), then the
no-swizzle N=8 case and the SW32/SW64 cases (fewest precedents), then the tnspB sense.
"""
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
from gemm_sm90_src import all_cases, module_source, swizzle_offset_sm90  # noqa: E402

CASES = all_cases()
TORCH_DTYPE = {"f16": torch.float16, "bf16": torch.bfloat16}


def _need_hopper():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a compute capability 9.0 GPU (wgmma is sm_90a only)")


@functools.lru_cache(maxsize=None)
def _functions() -> dict:
    """Compile all cases for sm_90a (a few NVRTC modules, in parallel): name -> function."""
    from tilecraft.compiler import compile_cuda_nvrtc
    from tilecraft.runtime.cuda_driver import CudaModule
    _need_hopper()
    n = min(8, os.cpu_count() or 1)
    groups = [CASES[i::n] for i in range(n)]
    with ThreadPoolExecutor(n) as ex:
        binaries = list(ex.map(lambda cs: compile_cuda_nvrtc(module_source(cs), "sm_90a"), groups))
    fns = {}
    for cs, b in zip(groups, binaries):
        mod = CudaModule(b.cubin)
        for c in cs:
            fns[c.name] = mod.function(c.name)
    return fns


def _run(case, a_st, b_st, c):
    fn = _functions()[case.name]
    info = torch.full((2,), -1, dtype=torch.int32, device="cuda")
    fn.launch((1, 1, 1), (case.threads, 1, 1), 0, torch.cuda.current_stream().cuda_stream,
              [("ptr", a_st.data_ptr()), ("ptr", b_st.data_ptr()), ("ptr", c.data_ptr()),
               ("ptr", info.data_ptr())])
    torch.cuda.synchronize()
    return info.cpu().tolist()


def test_shared_tiles_are_1024_aligned():
    case = CASES[0]
    dt = TORCH_DTYPE[case.dtype]
    a = torch.zeros(*case.a_stored, device="cuda", dtype=dt)
    b = torch.zeros(*case.b_stored, device="cuda", dtype=dt)
    c = torch.zeros(case.M, case.N, device="cuda")
    assert _run(case, a, b, c) == [0, 0], "static __shared__ __align__(1024) arrays are not 1024-aligned"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gemm_sm90_matches_torch(case):
    dt = TORCH_DTYPE[case.dtype]
    a_st = torch.randn(*case.a_stored, device="cuda").to(dt)
    b_st = torch.randn(*case.b_stored, device="cuda").to(dt)
    c0 = torch.randn(case.M, case.N, device="cuda")
    c = c0.clone()
    info = _run(case, a_st, b_st, c)
    assert info == [0, 0], f"shared tiles misaligned (addr % 1024 = {info}): the layout needs 1024"
    a = a_st.T if case.trans_a else a_st
    b = b_st.T if case.trans_b else b_st
    ref = c0.double() + case.reps * (a.double() @ b.double())
    torch.testing.assert_close(c.double(), ref, rtol=1e-4, atol=1e-3 * case.reps)


def test_gemm_sm90_single_element_probes():
    """Localises a layout bug: A = e_i (one 1 in row m, column k), B = ones -> C row m is all 1s.
    Run for every m/k of the basic 2-warpgroup case; a wrong descriptor shows which (m, k) moved."""
    case = next(c for c in CASES if (c.M, c.N, c.K, c.WG, c.trans_a, c.trans_b, c.dtype, c.reps)
                == (128, 128, 64, 2, False, False, "f16", 1))
    wrong = []
    for m in (0, 1, 7, 8, 15, 16, 63, 64, 100, 127):
        for k in (0, 1, 7, 8, 15, 16, 31, 32, 63):
            a = torch.zeros(case.M, case.K, device="cuda", dtype=torch.float16)
            a[m, k] = 1
            b = torch.arange(case.K * case.N, device="cuda", dtype=torch.float32).reshape(case.K, case.N)
            b = (b % 61).to(torch.float16)
            c = torch.zeros(case.M, case.N, device="cuda")
            _run(case, a, b, c)
            ref = torch.zeros(case.M, case.N, device="cuda")
            ref[m] = b[k].float()
            if not torch.equal(c, ref):
                nz = c.nonzero().tolist()[:4]
                wrong.append((m, k, nz))
    assert not wrong, wrong[:10]


SWZ_SRC = r"""
#include <tilecraft/tilecraft.h>
template <int L>
__device__ void table(int* out, int rows) {
  for (int i = threadIdx.x; i < rows * L; i += blockDim.x) out[i] = tc::swizzle_offset_sm90<L, 2, 16>(i / L, i % L);
}
extern "C" __global__ void swz(int* out) {
  int o = 0;
  table<8>(out + o, 16); o += 16 * 8;
  table<16>(out + o, 16); o += 16 * 16;
  table<32>(out + o, 16); o += 16 * 32;
  table<64>(out + o, 16); o += 16 * 64;
  table<128>(out + o, 16); o += 16 * 128;
  table<192>(out + o, 16); o += 16 * 192;
  table<320>(out + o, 16); o += 16 * 320;
}
"""
SWZ_TABLES = [8, 16, 32, 64, 128, 192, 320]


def test_swizzle_offset_sm90_matches_python_model():
    from tilecraft.compiler import compile_cuda_nvrtc
    from tilecraft.runtime.cuda_driver import CudaModule
    fn = CudaModule(compile_cuda_nvrtc(SWZ_SRC, "sm_90a" if torch.cuda.get_device_capability() == (9, 0)
                                       else "sm_80").cubin).function("swz")
    total = sum(16 * L for L in SWZ_TABLES)
    out = torch.full((total,), -1, dtype=torch.int32, device="cuda")
    fn.launch((1, 1, 1), (128, 1, 1), 0, torch.cuda.current_stream().cuda_stream,
              [("ptr", out.data_ptr())])
    got = out.cpu().tolist()
    expect = [swizzle_offset_sm90(L, 2, i // L, i % L, 16) for L in SWZ_TABLES for i in range(16 * L)]
    assert got == expect

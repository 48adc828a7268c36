"""Launch hand-written CUDA kernels through tilecraft.runtime.cuda_driver and compare with torch.
Needs a GPU (sm_80+); skipped otherwise."""
from __future__ import annotations

import os
import time

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
]

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda")

VECADD = r"""
extern "C" __global__ void vec_add(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int n, float alpha) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + alpha * b[i];
}
"""


def _arch() -> str:
    from tilecraft.runtime.cuda_driver import device_properties
    return device_properties(torch.cuda.current_device()).arch


def _module(src: str, arch: str | None = None):
    from tilecraft.compiler import compile_cuda_nvrtc
    from tilecraft.runtime.cuda_driver import CudaModule
    return CudaModule(compile_cuda_nvrtc(src, arch or _arch()).cubin)


def test_device_properties():
    from tilecraft.runtime.cuda_driver import device_properties
    p = device_properties(torch.cuda.current_device())
    cap = torch.cuda.get_device_capability()
    assert (p.cc_major, p.cc_minor) == cap
    assert p.sm_count == torch.cuda.get_device_properties(0).multi_processor_count
    assert p.max_shared_per_block_optin >= p.max_shared_per_block == 48 * 1024
    print(f"\n{p}")


def test_vector_add_matches_torch():
    fn = _module(VECADD).function("vec_add")
    n = 100_003
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    stream = torch.cuda.current_stream().cuda_stream
    fn.launch(((n + 255) // 256, 1, 1), (256, 1, 1), 0, stream,
              [("ptr", a.data_ptr()), ("ptr", b.data_ptr()), ("ptr", c.data_ptr()),
               ("int32", n), ("float32", 0.5)])
    torch.testing.assert_close(c, a + 0.5 * b)


def test_launch_overhead_is_small():
    fn = _module(VECADD).function("vec_add")
    a = torch.randn(1024, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    packer = fn.packer(["ptr", "ptr", "ptr", "int32", "float32"])
    vals = [a.data_ptr(), a.data_ptr(), a.data_ptr(), 1024, 0.0]
    for _ in range(100):
        fn.launch_packed((4, 1, 1), (256, 1, 1), 0, stream, packer, vals)
    torch.cuda.synchronize()
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        fn.launch_packed((4, 1, 1), (256, 1, 1), 0, stream, packer, vals)
    host_us = (time.perf_counter() - t0) / n * 1e6
    t0 = time.perf_counter()
    args = [("ptr", vals[0]), ("ptr", vals[1]), ("ptr", vals[2]), ("int32", 1024), ("float32", 0.0)]
    for _ in range(n):
        fn.launch((4, 1, 1), (256, 1, 1), 0, stream, args)
    pairs_us = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    print(f"\nhost launch overhead: {host_us:.1f} us packed, {pairs_us:.1f} us with (kind, value) pairs")
    assert host_us < 30 and pairs_us < 40


def test_launch_from_a_fresh_thread_and_error_names_kernel():
    import threading
    from tilecraft.runtime.cuda_driver import CudaError
    fn = _module(VECADD).function("vec_add")
    a = torch.randn(256, device="cuda")
    c = torch.empty_like(a)
    stream = torch.cuda.current_stream().cuda_stream
    errors = []

    def run():
        try:
            fn.launch((1, 1, 1), (256, 1, 1), 0, stream,
                      [("ptr", a.data_ptr()), ("ptr", a.data_ptr()), ("ptr", c.data_ptr()),
                       ("int32", 256), ("float32", 1.0)])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert not errors, errors
    torch.cuda.synchronize()
    torch.testing.assert_close(c, 2 * a)
    with pytest.raises(CudaError, match="vec_add"):  # 2048 threads per block is invalid
        fn.launch((1, 1, 1), (2048, 1, 1), 0, stream,
                  [("ptr", a.data_ptr()), ("ptr", a.data_ptr()), ("ptr", c.data_ptr()),
                   ("int32", 256), ("float32", 1.0)])


@pytest.mark.parametrize("mnk", [(256, 384, 128), (200, 136, 72)])
def test_pipelined_gemm_matches_torch(mnk):
    """Validates the fragment layouts documented in mma.h / ldmatrix.h and the cp.async
    pipeline (including zero-filled ragged edges) on real hardware."""
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("needs sm_80+")
    M, N, K = mnk
    with open(os.path.join(HERE, "gemm_kernel.cu")) as f:
        fn = _module(f.read()).function("tc_gemm_f16")
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    smem = 3 * (128 * 40 + 32 * 136) * 2  # > 48 KiB: launch opts in automatically
    fn.launch(((N + 127) // 128, (M + 127) // 128, 1), (128, 1, 1), smem,
              torch.cuda.current_stream().cuda_stream,
              [("ptr", a.data_ptr()), ("ptr", b.data_ptr()), ("ptr", c.data_ptr()),
               ("int32", M), ("int32", N), ("int32", K)])
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


DEVICE_CHECKS = r"""
#include <tilecraft/tilecraft.h>
extern "C" __global__ void checks(int* iout, float* fout, const float* fin, float* amax) {
  const int lane = threadIdx.x;
  // quad all-reduce (lane bits 0, 1) and whole-warp all-reduce
  iout[lane] = tc::shfl_xor_reduce<tc::SumOp, 1, 2>(lane);
  iout[32 + lane] = tc::warp_allreduce<tc::MaxOp>(lane * 7 % 32);
  fout[lane] = tc::warp_allreduce<tc::SumOp, 8>(fin[lane]);
  fout[32 + lane] = tc::cast<float>(tc::shfl_xor_reduce<tc::MinOp, 4, 8, 16>(tc::cast<half_t>(fin[lane])));
  // integer helpers with Python semantics
  iout[64 + lane] = tc::floordiv(lane - 16, -3);
  iout[96 + lane] = tc::floormod(lane - 16, 5);
  tc::atomic_max(&amax[0], fin[lane]);
  tc::atomic_min(&amax[1], fin[lane]);
  tc::atomic_add(&amax[2], fin[lane]);
}
"""


def test_reductions_atomics_and_integer_helpers_on_device():
    fn = _module(DEVICE_CHECKS).function("checks")
    iout = torch.zeros(128, dtype=torch.int32, device="cuda")
    fout = torch.zeros(64, device="cuda")
    fin = torch.randn(32, device="cuda")
    amax = torch.tensor([-float("inf"), float("inf"), 0.0], device="cuda")
    fn.launch((1, 1, 1), (32, 1, 1), 0, torch.cuda.current_stream().cuda_stream,
              [("ptr", iout.data_ptr()), ("ptr", fout.data_ptr()), ("ptr", fin.data_ptr()),
               ("ptr", amax.data_ptr())])
    torch.cuda.synchronize()
    lanes = torch.arange(32)
    got = iout.cpu()
    assert got[:32].tolist() == [sum(4 * (l // 4) + i for i in range(4)) for l in range(32)]
    assert got[32:64].tolist() == [31] * 32
    assert got[64:96].tolist() == [(l - 16) // -3 for l in range(32)]
    assert got[96:].tolist() == [(l - 16) % 5 for l in range(32)]
    f = fin.cpu()
    torch.testing.assert_close(fout[:32].cpu(), f.view(4, 8).sum(1).repeat_interleave(8))
    h = f.half().float()
    expect_min = torch.stack([h[(lanes % 4) == (l % 4)].min() for l in range(32)])
    torch.testing.assert_close(fout[32:].cpu(), expect_min)
    assert amax[0].item() == f.max().item() and amax[1].item() == f.min().item()
    torch.testing.assert_close(amax[2].cpu(), f.sum(), rtol=1e-5, atol=1e-5)

"""How fast can mma.sync go on this card?  The ceiling the sm_80 GEMM path is judged against.

Three kernels, no global memory in their loops:
  regs      m16n8k16 mmas on register operands only (4x8 independent accumulator tiles per warp,
            the 64x64 warp tile of the GEMM kernels), warps per SM varied;
  gemm_ss   tc::gemm_ss from one shared A/B tile, called repeatedly (the GEMM main loop without
            its cp.async copies and barriers) at the block shapes the benchmark uses;
Prints TFLOP/s next to cuBLAS at 4096^3 measured in the same run.

    PYTHONPATH=. python3 benchmarks/mma_peak.py
"""
from __future__ import annotations

import statistics

import torch

from tilecraft.compiler import compile_cuda_nvrtc
from tilecraft.runtime.cuda_driver import CudaModule
import tilecraft

SRC = r"""
#include "tilecraft/tilecraft.h"
extern "C" __global__ void regs(float* out, int iters) {
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ (threadIdx.x * (i + 1));
  for (int i = 0; i < 2; ++i) b[i] = 0x3c003c00u ^ (threadIdx.x * (i + 7));
  float c[32][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int t = 0; t < 32; ++t) tc::mma_m16n8k16_f16_f32(c[t], a, b);
  }
  float s = 0.f;
#pragma unroll
  for (int t = 0; t < 32; ++t) s += c[t][0] + c[t][1] + c[t][2] + c[t][3];
  if (s == 12345.f) out[0] = s;
}

template <int M, int N, int K, int WM, int WN>
__device__ void ss_body(float* out, int iters) {
  extern __shared__ __align__(128) unsigned char smem[];
  tc::half_t* A = reinterpret_cast<tc::half_t*>(smem);
  tc::half_t* B = A + M * K;
  for (int i = threadIdx.x; i < M * K + K * N; i += blockDim.x) A[i] = tc::half_t(0.001f * (i % 7));
  __syncthreads();
  float C[M * N / (32 * WM * WN)] = {};
  for (int it = 0; it < iters; ++it)
    tc::gemm_ss<M, N, K, WM, WN, false, false, 1, 1, tc::half_t>(A, B, C);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < M * N / (32 * WM * WN); ++i) s += C[i];
  if (s == 12345.f) out[0] = s;
}
extern "C" __global__ void __launch_bounds__(128) ss_128x128x64(float* out, int iters) { ss_body<128, 128, 64, 2, 2>(out, iters); }
extern "C" __global__ void __launch_bounds__(256) ss_128x256x64(float* out, int iters) { ss_body<128, 256, 64, 2, 4>(out, iters); }
extern "C" __global__ void __launch_bounds__(256) ss_128x128x64_8w(float* out, int iters) { ss_body<128, 128, 64, 2, 4>(out, iters); }
extern "C" __global__ void __launch_bounds__(256) ss_128x128x64_8w_4x2(float* out, int iters) { ss_body<128, 128, 64, 4, 2>(out, iters); }
"""


def time_ms(fn, n=20):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    return statistics.median(ts)


def main():
    binary = compile_cuda_nvrtc(SRC, "sm_90a", include_dirs=[tilecraft.include_dir()])
    mod = CudaModule(binary.cubin)
    out = torch.zeros(1, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    ms = time_ms(lambda: a @ b)
    print(f"cuBLAS fp16 4096^3: {2 * 4096**3 / ms / 1e9:.0f} TFLOP/s")
    fn = mod.function("regs")
    iters = 2000
    for warps_per_sm in (4, 8, 16):
        blocks = sms * warps_per_sm // 4
        ms = time_ms(lambda: fn.launch((blocks, 1, 1), (128, 1, 1), 0, stream,
                                       [("ptr", out.data_ptr()), ("int32", iters)]))
        flops = blocks * 4 * iters * 32 * 2 * 16 * 8 * 16
        print(f"regs: mma.sync m16n8k16 f16->f32, {warps_per_sm} warps/SM: {flops / ms / 1e9:.0f} TFLOP/s")
    for name, m, n, k, threads in (("ss_128x128x64", 128, 128, 64, 128), ("ss_128x256x64", 128, 256, 64, 256),
                                   ("ss_128x128x64_8w", 128, 128, 64, 256), ("ss_128x128x64_8w_4x2", 128, 128, 64, 256)):
        fn = mod.function(name)
        smem = (m * k + k * n) * 2
        iters = 400
        for per_sm in (1, 2):
            blocks = sms * per_sm
            ms = time_ms(lambda: fn.launch((blocks, 1, 1), (threads, 1, 1), smem, stream,
                                           [("ptr", out.data_ptr()), ("int32", iters)]))
            flops = blocks * iters * 2 * m * n * k
            print(f"gemm_ss {name} ({threads} thr), {per_sm} block/SM: {flops / ms / 1e9:.0f} TFLOP/s")


if __name__ == "__main__":
    main()

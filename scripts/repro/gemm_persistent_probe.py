"""Probe (issue 9): how much would a persistent tile scheduler buy the sm_90a GEMM?

Compiles tilecraft's reference GEMM (128x256x64, 3 stages, 256 threads) as generated, unsplit and
warp-specialized, then two hand-written persistent forms of the same kernel (a CUDA post-processing
callback swaps the source; the launch is patched to one block per SM):

  persistent unsplit:  each block walks tiles blockIdx.x, +gridDim.x, ...; the TMA ring's stage and
                       parity come from a running iteration count, so the loads of the next tile's first
                       stages are issued during this tile's last iterations and land during its epilogue;
                       the epilogue's staging tile has its own shared memory.
  persistent WS:       the same walk in a producer warpgroup (one thread issues TMA into a full/empty ring
                       running across tiles) and two consumer warpgroups (setmaxnreg 24 / 240); the
                       producer fills the next tile's stages while the consumers run the epilogue.

Every row is checked against torch.matmul on fresh random inputs, then timed beside it (CUDA events,
median).  A measurement to decide what the compiler should generate, not a kernel to ship.
    python scripts/repro/gemm_persistent_probe.py   ->  a markdown table on stdout"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from swapped_source import compile_swapped, gemm_problems, num_sms, race  # noqa: E402

from tilecraft.kernels.gemm import matmul  # noqa: E402

BM, BN, BK, S = 128, 256, 64, 3
A_STAGE, B_STAGE = BM * BK, BK * BN            # elements per stage
STAGE_LD = BN + 8                               # the staging tile's padded row (as stage_epilogue pads it)

COMMON = r"""
#define TC_WGMMA_ONLY
#define TC_WGMMA_N256
#include "tilecraft/tilecraft.h"
namespace probe {
constexpr int GX = @GX@, GY = @GY@, NT = GX * GY, KT = @KT@, S = @S@, N_ = @N@;
__device__ __forceinline__ void tile_of(int t, int& bx, int& by) {  // tilecraft's panel rasterization (10 rows)
  const int panel = 10, per = panel * GX;
  const int p = t / per, rows = min(panel, GY - p * panel), in = t - p * per;
  by = p * panel + in % rows;
  bx = in / rows;
}
__device__ __forceinline__ void load_stage(tc::half_t* A_shared, tc::half_t* B_shared, const tc::TmaDesc* da,
                                           const tc::TmaDesc* db, tc::uint64_t* bar, int s, int ko, int bx, int by) {
  tc::tma_expect(bar, 49152);
  tc::tma_load_tile(&A_shared[s * @A_STAGE@ + tc::swizzle_offset_sm90<64, 2, 128>(0, 0)], 0, da, bar, ko * 64, by * 128);
#pragma unroll
  for (int p = 0; p < 4; ++p)
    tc::tma_load_tile(&B_shared[s * @B_STAGE@ + tc::swizzle_offset_sm90<256, 2, 64>(0, 0)], 4096 * p, db, bar,
                      bx * 256 + 64 * p, ko * 64);
}
template <int THREADS>
__device__ __forceinline__ void epilogue(const float* C_local, tc::half_t* stage, tc::half_t* C, int tid, int bx, int by) {
#pragma unroll
  for (int g2 = 0; g2 < 64; ++g2)
    tc::vec_store<tc::half_t, float, 2>(&stage[((((tid / 4) % 8) + ((g2 % 2) * 8)) + (((tid / 32) % 4) * 16) + ((tid / 128) * 64)) * @LD@
                                               + ((tid % 4) * 2) + ((g2 / 2) * 8)], &C_local[g2 * 2]);
  if (THREADS == 256) __syncthreads(); else tc::consumer_sync<256>();
#pragma unroll
  for (int e3 = 0; e3 < 16; ++e3)
    tc::vec_store<tc::half_t, tc::half_t, 8>(&C[(by * 128 + (e3 * 256 + tid) / 32) * N_ + bx * 256 + ((e3 * 256 + tid) % 32) * 8],
                                             &stage[((e3 * 256 + tid) / 32) * @LD@ + ((e3 * 256 + tid) % 32) * 8]);
}
}  // namespace probe
"""

UNSPLIT = r"""
extern "C" __global__ void __launch_bounds__(256, 1) main_kernel(tc::half_t* __restrict__ A, tc::half_t* __restrict__ B, tc::half_t* __restrict__ C, const __grid_constant__ tc::TmaDesc tc_tma_desc_0, const __grid_constant__ tc::TmaDesc tc_tma_desc_1) {
  using namespace probe;
  extern __shared__ __align__(1024) unsigned char tc_smem[];
  const int tid = threadIdx.x;
  tc::uint64_t* full = reinterpret_cast<tc::uint64_t*>(tc_smem);
  tc::half_t* B_shared = reinterpret_cast<tc::half_t*>(tc_smem + 1024);
  tc::half_t* A_shared = reinterpret_cast<tc::half_t*>(tc_smem + 1024 + S * @B_STAGE@ * 2);
  tc::half_t* stage = reinterpret_cast<tc::half_t*>(tc_smem + 1024 + S * (@A_STAGE@ + @B_STAGE@) * 2);
  if (tid == 0) for (int s = 0; s < S; ++s) tc::mbar_init(&full[s], 1);
  __syncthreads();
  const int mine = (NT - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x;   // tiles of this block
  const int total = mine * KT;
  auto issue = [&](int gl) {   // global iteration gl of this block: tile gl / KT, k-step gl % KT
    int bx, by;
    tile_of(blockIdx.x + (gl / KT) * gridDim.x, bx, by);
    load_stage(A_shared, B_shared, &tc_tma_desc_0, &tc_tma_desc_1, &full[gl % S], gl % S, gl % KT, bx, by);
  };
  if (tid == 0)
    for (int gl = 0; gl < S - 1 && gl < total; ++gl) issue(gl);
  float C_local[128];
  int g = 0;
  for (int t = blockIdx.x; t < NT; t += gridDim.x) {
    int bx, by;
    tile_of(t, bx, by);
#pragma unroll
    for (int r = 0; r < 128; ++r) C_local[r] = 0.0f;
    for (int ko = 0; ko < KT; ++ko, ++g) {
      const int s = g % S;
      tc::mbar_wait_parity(&full[s], (g / S) % 2);
      tc::gemm_ss_sm90<128, 256, 64, 2, false, false, tc::half_t, 1, 128, 64>(&A_shared[s * @A_STAGE@ + tc::swizzle_offset_sm90<64, 2, 128>(0, 0)], &B_shared[s * @B_STAGE@ + tc::swizzle_offset_sm90<256, 2, 64>(0, 0)], &C_local[0]);
      __syncthreads();
      if (tid == 0 && g + S - 1 < total) issue(g + S - 1);
    }
    tc::wgmma_drain<128>(&C_local[0]);
    epilogue<256>(C_local, stage, C, tid, bx, by);
  }
  __syncthreads();
  if (tid == 0) for (int s = 0; s < S; ++s) tc::mbar_inval(&full[s]);
}
"""

WS = r"""
extern "C" __global__ void __launch_bounds__(384, 1) main_kernel(tc::half_t* __restrict__ A, tc::half_t* __restrict__ B, tc::half_t* __restrict__ C, const __grid_constant__ tc::TmaDesc tc_tma_desc_0, const __grid_constant__ tc::TmaDesc tc_tma_desc_1) {
  using namespace probe;
  extern __shared__ __align__(1024) unsigned char tc_smem[];
  const int tid = threadIdx.x;
  tc::uint64_t* full = reinterpret_cast<tc::uint64_t*>(tc_smem);
  tc::uint64_t* empty = reinterpret_cast<tc::uint64_t*>(tc_smem + 512);
  tc::half_t* B_shared = reinterpret_cast<tc::half_t*>(tc_smem + 1024);
  tc::half_t* A_shared = reinterpret_cast<tc::half_t*>(tc_smem + 1024 + S * @B_STAGE@ * 2);
  tc::half_t* stage = reinterpret_cast<tc::half_t*>(tc_smem + 1024 + S * (@A_STAGE@ + @B_STAGE@) * 2);
  if (tid == 0)
    for (int s = 0; s < S; ++s) { tc::mbar_init(&full[s], 1); tc::mbar_init(&empty[s], 8); }
  __syncthreads();
  if (tid >= 256) {
    tc::warpgroup_reg_dealloc<24>();
    if (tid == 256) {
      int g = 0;
      for (int t = blockIdx.x; t < NT; t += gridDim.x) {
        int bx, by;
        tile_of(t, bx, by);
        for (int ko = 0; ko < KT; ++ko, ++g) {
          const int s = g % S;
          if (g >= S) tc::mbar_wait_parity(&empty[s], ((g / S) + 1) % 2);
          load_stage(A_shared, B_shared, &tc_tma_desc_0, &tc_tma_desc_1, &full[s], s, ko, bx, by);
        }
      }
    }
  } else {
    tc::warpgroup_reg_alloc<240>();
    float C_local[128];
    int g = 0;
    for (int t = blockIdx.x; t < NT; t += gridDim.x) {
      int bx, by;
      tile_of(t, bx, by);
#pragma unroll
      for (int r = 0; r < 128; ++r) C_local[r] = 0.0f;
      for (int ko = 0; ko < KT; ++ko, ++g) {
        const int s = g % S;
        tc::mbar_wait_parity(&full[s], (g / S) % 2);
        tc::gemm_ss_sm90<128, 256, 64, 2, false, false, tc::half_t, 1, 128, 64>(&A_shared[s * @A_STAGE@ + tc::swizzle_offset_sm90<64, 2, 128>(0, 0)], &B_shared[s * @B_STAGE@ + tc::swizzle_offset_sm90<256, 2, 64>(0, 0)], &C_local[0]);
        if (ko > 0) tc::mbar_arrive_warp(&empty[(g + S - 1) % S]);
      }
      tc::wgmma_drain<128>(&C_local[0]);
      tc::mbar_arrive_warp(&empty[(g + S - 1) % S]);
      tc::consumer_sync<256>();
      epilogue<384>(C_local, stage, C, tid, bx, by);
    }
  }
  __syncthreads();
  if (tid == 0)
    for (int s = 0; s < S; ++s) { tc::mbar_inval(&full[s]); tc::mbar_inval(&empty[s]); }
}
"""

SMEM = 1024 + S * (A_STAGE + B_STAGE) * 2 + BM * STAGE_LD * 2


def source(body: str, m: int, n: int, k: int) -> str:
    text = COMMON + body
    for key, val in (("GX", n // BN), ("GY", m // BM), ("KT", k // BK), ("S", S), ("N", n),
                     ("A_STAGE", A_STAGE), ("B_STAGE", B_STAGE), ("LD", STAGE_LD)):
        text = text.replace(f"@{key}@", str(val))
    return text


def build(m, n, k, form):
    ws = form in ("ws", "persistent ws")
    fn = matmul.get_tir(m, n, k, BM, BN, BK, S, 256)
    if not form.startswith("persistent"):
        return compile_swapped(fn, pass_configs={"tc.warp_specialize": ws})
    return compile_swapped(fn, source(WS if ws else UNSPLIT, m, n, k), {"tc.warp_specialize": ws},
                           grid=(num_sms(), 1, 1), smem=SMEM)


def main():
    """Sizes as MxNxK arguments (default 4096^3 and 8192^3); rows timed interleaved (swapped_source.race)."""
    torch.manual_seed(0)
    rows = []
    for size, m, n, k, a, b, ref in gemm_problems():
        for form in ("unsplit", "ws", "persistent unsplit", "persistent ws"):
            rows.append((size, form, lambda m=m, n=n, k=k, form=form: build(m, n, k, form), (a, b), ref,
                         lambda a=a, b=b: torch.matmul(a, b)))
    race(rows)

if __name__ == "__main__":
    main()

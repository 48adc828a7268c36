"""Probe (issue 9): is tilecraft's sm_90a GEMM held back by L2 -> shared-memory traffic, and would
clusters of two blocks sharing B by TMA multicast (as cuBLAS / CUTLASS do) lift it?

Hand-written from tilecraft's own unsplit 128x256x64/3/256 kernel, changed in one respect: blocks
come in clusters of two along M (`__cluster_dims__(1, 2, 1)`: same columns of B, rows by and by+1),
and each block loads only half of every B stage (two of its four 64-column panels), multicast into
both blocks' shared memory; A stays per block.  Per block and k-tile that is 32 KB from L2 instead
of 48 KB.  A stage is refilled once both blocks released it: every consumer warp arrives on the
stage's empty mbarrier in its own block and in the peer (mapa + a cluster-scope arrive); the
issuing thread waits for all 16 arrivals.  Cluster barriers after the barriers' set-up and before
exit keep the peer's multicasts and arrivals inside live blocks.

The warp-specialized form (not yet run on the GPU) moves the issuing thread into a producer warpgroup
(setmaxnreg 40 / 232, as tilecraft's own warp-specialized loop), so no consumer warp waits for the peer.

The launch reuses what tilecraft compiled for the same tile (its tensor maps: A 128x64 boxes,
B 64x64 panels); a CUDA post-processing callback swaps the source.  Rows are checked against
torch.matmul on fresh random inputs and timed beside it (CUDA events, median).
    python scripts/repro/gemm_multicast_probe.py   ->  a markdown table on stdout"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from swapped_source import compile_swapped, report  # noqa: E402

from tilecraft.kernels.gemm import matmul  # noqa: E402

S = 3
SMEM = 1024 + S * (16384 + 32768)

KERNEL = r"""
#define TC_WGMMA_ONLY
#define TC_WGMMA_N256
#include "tilecraft/tilecraft.h"
namespace probe {
constexpr int GX = @GX@, GY = @GY@, KT = @KT@, S = @S@, N_ = @N@;
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void arrive_remote(tc::uint64_t* bar, unsigned peer) {
  unsigned local = static_cast<unsigned>(__cvta_generic_to_shared(bar)), remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(peer));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}
__device__ __forceinline__ void load_multicast(void* dst, const tc::TmaDesc* desc, tc::uint64_t* bar, int col, int row,
                                               unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n"
      ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))), "l"(reinterpret_cast<unsigned long long>(desc)),
        "r"(col), "r"(row), "r"(static_cast<unsigned>(__cvta_generic_to_shared(bar))), "h"(mask) : "memory");
}
}  // namespace probe

"""

UNSPLIT = r"""
extern "C" __global__ void __cluster_dims__(1, 2, 1) __launch_bounds__(256, 1) main_kernel(tc::half_t* __restrict__ A, tc::half_t* __restrict__ B, tc::half_t* __restrict__ C, const __grid_constant__ tc::TmaDesc tc_tma_desc_0, const __grid_constant__ tc::TmaDesc tc_tma_desc_1) {
  using namespace probe;
  extern __shared__ __align__(1024) unsigned char tc_smem[];
  const int tid = threadIdx.x;
@PRELUDE@
  auto issue = [&](int g) {
    const int s = g % S;
    tc::tma_expect(&full[s], 49152);
    tc::tma_load_tile(&A_shared[s * 8192 + tc::swizzle_offset_sm90<64, 2, 128>(0, 0)], 0, &tc_tma_desc_0, &full[s], g * 64, by * 128);
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int pn = 2 * rank + q;
      load_multicast(&B_shared[s * 16384 + tc::swizzle_offset_sm90<256, 2, 64>(0, 0) + 4096 * pn], &tc_tma_desc_1, &full[s],
                     bx * 256 + 64 * pn, g * 64, (unsigned short)3);
    }
  };
  if (tid == 0) { issue(0); if (KT > 1) issue(1); }
  float C_local[128];
#pragma unroll
  for (int r = 0; r < 128; ++r) C_local[r] = 0.0f;
  for (int ko = 0; ko < KT; ++ko) {
    const int s = ko % S;
    tc::mbar_wait_parity(&full[s], (ko / S) % 2);
    tc::gemm_ss_sm90<128, 256, 64, 2, false, false, tc::half_t, 1, 128, 64>(&A_shared[s * 8192 + tc::swizzle_offset_sm90<64, 2, 128>(0, 0)], &B_shared[s * 16384 + tc::swizzle_offset_sm90<256, 2, 64>(0, 0)], &C_local[0]);
    if (ko > 0 && (tid & 31) == 0) {
      tc::uint64_t* e = &empty[(ko - 1) % S];
      asm volatile("mbarrier.arrive.release.cluster.shared::cta.b64 _, [%0];\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(e))) : "memory");
      arrive_remote(e, peer);
    }
    if (tid == 0 && ko + S - 1 < KT) {
      const int g = ko + S - 1;
      if (g >= S) {
        tc::uint64_t* e = &empty[g % S];
        const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(e)), parity = ((g / S) + 1) % 2;
        asm volatile(
            "{\n .reg .pred P;\n WAIT_%=:\n"
            " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P, [%0], %1;\n"
            " @!P bra WAIT_%=;\n}\n" ::"r"(addr), "r"(parity) : "memory");
      }
      issue(g);
    }
  }
  tc::wgmma_drain<128>(&C_local[0]);
  cluster_sync();  // the peer has issued its last multicast into us and made its last arrivals
  tc::half_t* stage = reinterpret_cast<tc::half_t*>(tc_smem + 1024);
#pragma unroll
  for (int g2 = 0; g2 < 64; ++g2)
    tc::vec_store<tc::half_t, float, 2>(&stage[((((tid / 4) % 8) + ((g2 % 2) * 8)) + (((tid / 32) % 4) * 16) + ((tid / 128) * 64)) * 264
                                               + ((tid % 4) * 2) + ((g2 / 2) * 8)], &C_local[g2 * 2]);
  __syncthreads();
#pragma unroll
  for (int e3 = 0; e3 < 16; ++e3)
    tc::vec_store<tc::half_t, tc::half_t, 8>(&C[(by * 128 + (e3 * 256 + tid) / 32) * N_ + bx * 256 + ((e3 * 256 + tid) % 32) * 8],
                                             &stage[((e3 * 256 + tid) / 32) * 264 + ((e3 * 256 + tid) % 32) * 8]);
  if (tid == 0)
    for (int s = 0; s < S; ++s) { tc::mbar_inval(&full[s]); tc::mbar_inval(&empty[s]); }
}
"""


WS = r"""
extern "C" __global__ void __cluster_dims__(1, 2, 1) __launch_bounds__(384, 1) main_kernel(tc::half_t* __restrict__ A, tc::half_t* __restrict__ B, tc::half_t* __restrict__ C, const __grid_constant__ tc::TmaDesc tc_tma_desc_0, const __grid_constant__ tc::TmaDesc tc_tma_desc_1) {
  using namespace probe;
  extern __shared__ __align__(1024) unsigned char tc_smem[];
  const int tid = threadIdx.x;
@PRELUDE@
  if (tid >= 256) {
    tc::warpgroup_reg_dealloc<40>();
    if (tid == 256) {
      for (int g = 0; g < KT; ++g) {
        const int s = g % S;
        if (g >= S) {  // both blocks' 8 consumer warps released the stage's previous use
          const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(&empty[s])), parity = ((g / S) + 1) % 2;
          asm volatile(
              "{\n .reg .pred P;\n WAIT_%=:\n"
              " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P, [%0], %1;\n"
              " @!P bra WAIT_%=;\n}\n" ::"r"(addr), "r"(parity) : "memory");
        }
        tc::tma_expect(&full[s], 49152);
        tc::tma_load_tile(&A_shared[s * 8192 + tc::swizzle_offset_sm90<64, 2, 128>(0, 0)], 0, &tc_tma_desc_0, &full[s], g * 64, by * 128);
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int pn = 2 * rank + q;
          load_multicast(&B_shared[s * 16384 + tc::swizzle_offset_sm90<256, 2, 64>(0, 0) + 4096 * pn], &tc_tma_desc_1,
                         &full[s], bx * 256 + 64 * pn, g * 64, (unsigned short)3);
        }
      }
    }
  } else {
    tc::warpgroup_reg_alloc<232>();
    float C_local[128];
#pragma unroll
    for (int r = 0; r < 128; ++r) C_local[r] = 0.0f;
    for (int ko = 0; ko < KT; ++ko) {
      const int s = ko % S;
      tc::mbar_wait_parity(&full[s], (ko / S) % 2);
      tc::gemm_ss_sm90<128, 256, 64, 2, false, false, tc::half_t, 1, 128, 64>(&A_shared[s * 8192 + tc::swizzle_offset_sm90<64, 2, 128>(0, 0)], &B_shared[s * 16384 + tc::swizzle_offset_sm90<256, 2, 64>(0, 0)], &C_local[0]);
      if (ko > 0 && (tid & 31) == 0) {
        tc::uint64_t* e = &empty[(ko - 1) % S];
        asm volatile("mbarrier.arrive.release.cluster.shared::cta.b64 _, [%0];\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(e))) : "memory");
        arrive_remote(e, peer);
      }
    }
    tc::wgmma_drain<128>(&C_local[0]);
    tc::consumer_sync<256>();  // every consumer warp is past its last wgmma: the ring may become the staging tile
    tc::half_t* stage = reinterpret_cast<tc::half_t*>(tc_smem + 1024);
#pragma unroll
    for (int g2 = 0; g2 < 64; ++g2)
      tc::vec_store<tc::half_t, float, 2>(&stage[((((tid / 4) % 8) + ((g2 % 2) * 8)) + (((tid / 32) % 4) * 16) + ((tid / 128) * 64)) * 264
                                                 + ((tid % 4) * 2) + ((g2 / 2) * 8)], &C_local[g2 * 2]);
    tc::consumer_sync<256>();
#pragma unroll
    for (int e3 = 0; e3 < 16; ++e3)
      tc::vec_store<tc::half_t, tc::half_t, 8>(&C[(by * 128 + (e3 * 256 + tid) / 32) * N_ + bx * 256 + ((e3 * 256 + tid) % 32) * 8],
                                               &stage[((e3 * 256 + tid) / 32) * 264 + ((e3 * 256 + tid) % 32) * 8]);
  }
  cluster_sync();  // the peer's last multicasts into us and arrivals on our barriers are done
  if (tid == 0)
    for (int s = 0; s < S; ++s) { tc::mbar_inval(&full[s]); tc::mbar_inval(&empty[s]); }
}
"""


# both hand-written forms start alike: the block's rank in its pair, the pair's tile (panel order), barriers, stages
PRELUDE = r"""  const unsigned rank = cluster_rank(), peer = rank ^ 1u;
  // panel rasterization over pairs of row blocks (5 pairs = 10 rows per panel); the pair shares bx
  const int pair = blockIdx.x + (blockIdx.y / 2) * GX, per = 5 * GX, gp = GY / 2;
  const int p = pair / per, rows = min(5, gp - p * 5), in = pair - p * per;
  const int by = (p * 5 + in % rows) * 2 + rank, bx = in / rows;
  tc::uint64_t* full = reinterpret_cast<tc::uint64_t*>(tc_smem);
  tc::uint64_t* empty = reinterpret_cast<tc::uint64_t*>(tc_smem + 64);
  tc::half_t* B_shared = reinterpret_cast<tc::half_t*>(tc_smem + 1024);
  tc::half_t* A_shared = reinterpret_cast<tc::half_t*>(tc_smem + 1024 + S * 32768);
  if (tid == 0) {
    for (int s = 0; s < S; ++s) { tc::mbar_init(&full[s], 1); tc::mbar_init(&empty[s], 16); }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  cluster_sync();"""


def source(m, n, k, ws=False):
    text = KERNEL + (WS if ws else UNSPLIT).replace("@PRELUDE@", PRELUDE)
    for key, val in (("GX", n // 256), ("GY", m // 128), ("KT", k // 64), ("S", S), ("N", n)):
        text = text.replace(f"@{key}@", str(val))
    return text


FORMS = {  # name -> (hand-written source?, warp-specialized?)
    "tilecraft 128x256x64/3/256": (False, False),
    "tilecraft warp-specialized (as generated)": (False, True),
    "cluster 1x2, B multicast, unsplit": (True, False),
    "cluster 1x2, B multicast, warp-specialized": (True, True),
}


def build(m, n, k, form):
    multicast, ws = FORMS[form]
    fn = matmul.get_tir(m, n, k, 128, 256, 64, S, 256)
    configs = {"tc.warp_specialize": ws}
    if not multicast:
        return compile_swapped(fn, pass_configs=configs)
    return compile_swapped(fn, source(m, n, k, ws), configs, smem=SMEM)


def main():
    torch.manual_seed(0)
    print("| size | form | rel. error | ours ms | cuBLAS ms | ours/cuBLAS speed |")
    print("| --- | --- | --- | --- | --- | --- |")
    for m in (4096, 8192):
        a = torch.randn(m, m, device="cuda", dtype=torch.float16)
        b = torch.randn(m, m, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float()
        for form in FORMS:
            report(f"{m}^3", form, lambda: build(m, m, m, form), (a, b), ref, lambda: torch.matmul(a, b))


if __name__ == "__main__":
    main()

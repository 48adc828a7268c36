// tilecraft/tma.h — Hopper tensor-memory-accelerator (TMA) tile loads (sm_90 / sm_90a).
//
// One thread asks the TMA unit to copy a whole box of a 2-D global tensor into shared memory;
// the unit computes every address, zero-fills what lies outside the tensor and, as the bytes
// land, counts them against an mbarrier.  The other threads wait on that mbarrier.  Compared with
// cp.async (one 16-byte copy per thread instruction) the main loop issues one instruction per tile.
//
// The tensor is described by a 128-byte "tensor map" built on the host
// (tilecraft/runtime/tma.py, through cuTensorMapEncodeTiled) and passed to the kernel by value as
//   `const __grid_constant__ tc::TmaDesc desc`
// (__grid_constant__: the kernel takes its address, which must be the parameter's own address in
// the constant bank; copying it to a local variable would not work).  tc::TmaDesc is an opaque
// 64-byte-aligned 128-byte struct, so the header needs no <cuda.h>.
//
// Hardware rules (PTX ISA, "Tensor copy" / cuTensorMapEncodeTiled; checked on the host):
//   * global base 16-byte aligned, row pitch a multiple of 16 bytes, box sizes 1..256 per dim;
//   * the shared destination 128-byte aligned, 1024-byte aligned with a 128-byte swizzle;
//   * swizzle modes 32B / 64B / 128B need box_cols * elem_bytes <= the swizzle span; with 128B the
//     box lands in shared memory exactly as tc::swizzle_offset_sm90<box_cols, elem_bytes> lays out
//     a [box_rows][box_cols] tile (box_cols * elem_bytes == 128: chunk ^ (row % 8)), i.e. what the
//     wgmma descriptors read;
//   * coordinates are in elements, innermost (column) first, and may be negative or past the end
//     (those elements read as zero); the mbarrier is still credited with the full box size.
//
// mbarrier protocol for one load into a stage guarded by barrier `bar` (initialised with count 1):
//   thread 0:   tc::tma_expect(bar, box_bytes); tc::tma_load_2d(dst, &desc, bar, col, row);
//   everyone:   tc::mbar_wait_parity(bar, phase & 1);      (phase: how often `bar` completed)
// The expect must be issued by the same arrival that completes the phase: expect_tx arrives once
// and raises the pending byte count; the TMA's complete_tx lowers it; the phase completes when the
// arrival count and the byte count both reach zero.
#pragma once

#include "common.h"
#include "pipeline.h"
#include "atomic.h"  // tc::bulk_reduce_add falls back to element atomics

namespace tc {

struct alignas(64) TmaDesc {
  unsigned long long opaque[16];
};

// Initialise one mbarrier expecting `count` arrivals per phase (call from one thread, then a
// block barrier before anyone uses it).  On sm_90+ the init is also fenced for the async proxy
// (fence.mbarrier_init), so TMA completions may target it.
TC_DEVICE void mbar_init(uint64_t* bar, int count) {
  detail::mbar_init_at(detail::mbar_addr(bar), count);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// Invalidate an mbarrier so its bytes may be reused (one thread, after everyone is done with it).
TC_DEVICE void mbar_inval(uint64_t* bar) {
  detail::mbar_inval_at(detail::mbar_addr(bar));
}

// Wait until the phase with parity `parity` of `bar` has completed.
TC_DEVICE void mbar_wait_parity(uint64_t* bar, int parity) { detail::mbar_wait(detail::mbar_addr(bar), parity); }

// This thread's arrival on `bar` (T.barrier_arrive / T.mbarrier_arrive).  mbarrier.arrive has
// release semantics at CTA scope: the thread's earlier shared/global writes are visible to the
// threads whose wait then sees the phase complete (the wait acquires).
TC_DEVICE void mbar_arrive(uint64_t* bar) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared.b64 st, [%0];\n}\n" ::"r"(detail::mbar_addr(bar)) : "memory");
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// ---- thread-block clusters (T.ClusterKernel; sm_90+) -------------------------------------------
// This thread's arrival on the mbarrier at `bar`'s shared-memory offset in block `cta` (its rank,
// %cluster_ctarank) of this block's cluster: a remote arrival (T.mbarrier_arrive(bar, cta_id)).
// mapa turns the block's own shared address into that block's shared::cluster address; the arrival
// releases at cluster scope, so this thread's earlier writes reach the threads of block `cta` that
// then see the phase complete.  For .shared::cluster the state operand must be the sink `_`.
TC_DEVICE void mbar_arrive_cluster(uint64_t* bar, int cta) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(detail::mbar_addr(bar)), "r"(cta));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

// Wait until the phase with parity `parity` of this block's `bar` has completed, acquiring at
// cluster scope: the writes other blocks of the cluster made before their (remote, release.cluster)
// arrivals on it are visible afterwards (the plain wait acquires at CTA scope only).
TC_DEVICE void mbar_wait_parity_cluster(uint64_t* bar, int parity) {
  asm volatile(
      "{\n .reg .pred p;\n TC_MBAR_WAITC%=:\n"
      " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n @!p bra TC_MBAR_WAITC%=;\n}\n"
      ::"r"(detail::mbar_addr(bar)), "r"(parity) : "memory");
}

// Every thread of every block of the cluster waits here for all the others (release / acquire at
// cluster scope): after the mbarriers are set up (no block arrives on another's mbarrier before it
// is initialised, fence.mbarrier_init in mbar_init) and at a kernel's end (a block's shared memory
// must outlive the other blocks' arrivals on it).
TC_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// Fetch the tensor map into the TMA unit's cache ahead of the first load (optional, one thread).
TC_DEVICE void tma_prefetch(const TmaDesc* desc) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(desc)) : "memory");
}

// This thread's arrival on `bar`, announcing `bytes` more bytes that TMA loads will deliver.
TC_DEVICE void tma_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n"
               ::"r"(detail::mbar_addr(bar)), "r"(bytes) : "memory");
}

// Copy the box at (col, row) of the tensor `desc` describes into shared memory at `dst`; the
// bytes are counted against `bar`.  Issued by one thread.
TC_DEVICE void tma_load_2d(void* dst, const TmaDesc* desc, uint64_t* bar, int col, int row) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))), "l"(reinterpret_cast<uint64_t>(desc)),
        "r"(col), "r"(row), "r"(detail::mbar_addr(bar))
      : "memory");
}

// The same for tensors of 3, 4 and 5 dims: coordinates innermost first (c0 = column).  A box
// whose outer dims are 1 lands as a 2-D [rows][cols] box (a tile of one head of a
// [batch][seq][heads][dim] tensor, say).
TC_DEVICE void tma_load_3d(void* dst, const TmaDesc* desc, uint64_t* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n"
      ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))), "l"(reinterpret_cast<uint64_t>(desc)),
        "r"(c0), "r"(c1), "r"(c2), "r"(detail::mbar_addr(bar))
      : "memory");
}
TC_DEVICE void tma_load_4d(void* dst, const TmaDesc* desc, uint64_t* bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n"
      ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))), "l"(reinterpret_cast<uint64_t>(desc)),
        "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(detail::mbar_addr(bar))
      : "memory");
}
TC_DEVICE void tma_load_5d(void* dst, const TmaDesc* desc, uint64_t* bar, int c0, int c1, int c2, int c3,
                           int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n"
      ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))), "l"(reinterpret_cast<uint64_t>(desc)),
        "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(detail::mbar_addr(bar))
      : "memory");
}

// A TMA box into `base + offset` elements (a box of a tile, layout/tma.py::sm90_tile_boxes), at
// the coordinates given innermost first, for tensors of 2 to 5 dims.
template <class T>
TC_DEVICE void tma_load_tile(T* base, int offset, const TmaDesc* desc, uint64_t* bar, int col, int row) {
  tma_load_2d(base + offset, desc, bar, col, row);
}
template <class T>
TC_DEVICE void tma_load_tile(T* base, int offset, const TmaDesc* desc, uint64_t* bar, int c0, int c1, int c2) {
  tma_load_3d(base + offset, desc, bar, c0, c1, c2);
}
template <class T>
TC_DEVICE void tma_load_tile(T* base, int offset, const TmaDesc* desc, uint64_t* bar, int c0, int c1, int c2,
                             int c3) {
  tma_load_4d(base + offset, desc, bar, c0, c1, c2, c3);
}
template <class T>
TC_DEVICE void tma_load_tile(T* base, int offset, const TmaDesc* desc, uint64_t* bar, int c0, int c1, int c2,
                             int c3, int c4) {
  tma_load_5d(base + offset, desc, bar, c0, c1, c2, c3, c4);
}

#endif  // __CUDA_ARCH__ >= 900

// ---- warp specialization: a producer warpgroup feeding consumer warpgroups ----------------------
// The block is the kernel's THREADS consumer threads plus one producer warpgroup (threads
// [THREADS, THREADS + 128)).  One producer thread issues the TMA loads of every k-tile into a ring
// of S stages: it waits for empty[s], announces the tile's bytes on full[s] and issues the boxes.
// Consumers wait for full[s], run the tile's wgmmas and, once those retired, arrive on empty[s]
// (one arrival per consumer warp: empty[s] is initialised with THREADS / 32).
//
// Barriers among consumers only use named barrier 1 (bar.sync 1, THREADS): __syncthreads (barrier
// 0) would wait for the producer warpgroup too, which never reaches it.

// One arrival per warp on `bar` (lane 0's, after the warp's own wgmma reads have retired).
TC_DEVICE void mbar_arrive_warp(uint64_t* bar) {
  if ((threadIdx.x & 31) == 0) {
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n"
                 ::"r"(detail::mbar_addr(bar)) : "memory");
  }
}

// Barrier among the THREADS consumer threads (a multiple of 32), not the producer.
template <int THREADS>
TC_DEVICE void consumer_sync() {
  static_assert(THREADS % 32 == 0, "tc::consumer_sync: the consumers are whole warps");
  asm volatile("bar.sync 1, %0;\n" ::"n"(THREADS) : "memory");
}

// Turns of the consumer warpgroups (FlashAttention-3's warp scheduler barrier): warpgroup g of WG
// (threads 128g .. 128g+127) waits for its turn on named barrier 2+g, issues its wgmmas, and passes
// the turn to warpgroup g+1 (mod WG) by arriving on that one's barrier; each barrier counts the 128
// threads waiting and the 128 arriving.  The tensor cores then take the warpgroups' gemms in turn
// while the others run their softmax.  wg_turn_init gives warpgroup 0 the first turn; the last
// pass is left pending when the block exits.
template <int WG>
TC_DEVICE void wg_turn_init() {
  static_assert(WG >= 2 && WG <= 4, "tc::wg_turn_init: 2 to 4 consumer warpgroups (named barriers 2..5)");
  if (static_cast<int>(threadIdx.x) / 128 % WG == WG - 1) asm volatile("bar.arrive 2, 256;\n" ::: "memory");
}
template <int WG>
TC_DEVICE void wg_turn_wait() {
  asm volatile("bar.sync %0, 256;\n" ::"r"(2 + static_cast<int>(threadIdx.x) / 128 % WG) : "memory");
}
template <int WG>
TC_DEVICE void wg_turn_pass() {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(2 + (static_cast<int>(threadIdx.x) / 128 + 1) % WG) : "memory");
}

// setmaxnreg (sm_90a): move registers from the producer warpgroup (which needs few) to the
// consumers (wgmma accumulators).  Executed by every thread of a warpgroup, convergently, as the
// first statement of its role's branch; N is a multiple of 8 in [24, 256].  The kernel must be
// compiled with a register cap (__launch_bounds__(threads, 1)), and the budgets must fit in what
// the block holds at launch: producer + consumers * WG <= (WG + 1) * cap.
template <int N>
TC_DEVICE void warpgroup_reg_alloc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "tc::warpgroup_reg_alloc: N in [24, 256], multiple of 8");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
TC_DEVICE void warpgroup_reg_dealloc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "tc::warpgroup_reg_dealloc: N in [24, 256], multiple of 8");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// ---- bulk reduce: a row of a shared tile added into global memory (T.atomic_add of a shared tile) ----
// cp.reduce.async.bulk.global.shared::cta.bulk_group.add (PTX ISA 8.0, sm_90): the TMA unit reads BYTES
// contiguous bytes of shared memory and adds them element by element into global memory, each element
// atomically in L2 (relaxed, like atomicAdd).  One instruction per row instead of one atomic per element
// and thread.  Rules: BYTES a multiple of 16, both addresses 16-byte aligned; the shared bytes must be
// written before it through the generic proxy, then tc::fence_proxy_async_shared() in the writing
// threads and a block barrier.  A global address that is not 16-byte aligned (a tensor view at an odd
// offset) takes the element-by-element atomics instead, so the result never depends on alignment.
namespace detail {
template <typename T> struct BulkAdd;
template <> struct BulkAdd<float> {
  TC_DEVICE static void issue(float* g, uint32_t s, uint32_t bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
                 ::"l"(g), "r"(s), "r"(bytes) : "memory");
  }
};
template <> struct BulkAdd<half_t> {
  TC_DEVICE static void issue(half_t* g, uint32_t s, uint32_t bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f16 [%0], [%1], %2;\n"
                 ::"l"(g), "r"(s), "r"(bytes) : "memory");
  }
};
template <> struct BulkAdd<bfloat16_t> {
  TC_DEVICE static void issue(bfloat16_t* g, uint32_t s, uint32_t bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16 [%0], [%1], %2;\n"
                 ::"l"(g), "r"(s), "r"(bytes) : "memory");
  }
};
}  // namespace detail

template <int BYTES, typename T>
TC_DEVICE void bulk_reduce_add(T* dst, const T* src) {
  static_assert(BYTES % 16 == 0 && BYTES > 0, "tc::bulk_reduce_add: BYTES a positive multiple of 16");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if ((reinterpret_cast<unsigned long long>(dst) & 15ull) == 0) {
    detail::BulkAdd<T>::issue(dst, static_cast<uint32_t>(__cvta_generic_to_shared(src)), BYTES);
    return;
  }
#endif
  for (int i = 0; i < BYTES / static_cast<int>(sizeof(T)); ++i) atomic_add(dst + i, src[i]);
}

// As bulk_reduce_add for a whole tile that is one contiguous run in both memories, `bytes` of it (a
// multiple of 16; the rows of a ragged last tile that lie inside the tensor; nothing when <= 0): one TMA
// instruction instead of one per row.
template <typename T>
TC_DEVICE void bulk_reduce_add_n(T* dst, const T* src, int bytes) {
  if (bytes <= 0) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if ((reinterpret_cast<unsigned long long>(dst) & 15ull) == 0) {
    detail::BulkAdd<T>::issue(dst, static_cast<uint32_t>(__cvta_generic_to_shared(src)), static_cast<uint32_t>(bytes));
    return;
  }
#endif
  for (int i = 0; i < bytes / static_cast<int>(sizeof(T)); ++i) atomic_add(dst + i, src[i]);
}

// A TMA box of a shared tile (a box of layout/tma.py::sm90_tile_boxes at `base + offset` elements, in
// the box's swizzle) added element by element into the tensor `desc` describes at the coordinates given
// innermost first (cp.reduce.async.bulk.tensor ... .add.tile.bulk_group, PTX ISA 8.0, sm_90): one
// instruction per box; elements outside the tensor are not added (a ragged last tile).  The same rules
// as bulk_reduce_add: the shared bytes fenced (fence_proxy_async_shared) and a block barrier passed
// first, a bulk-group wait before the tile is written again.  The element type is the tensor map's.
#define TC_TMA_REDUCE(N, COORDS, ...)                                                                  \
  asm volatile("cp.reduce.async.bulk.tensor." #N "d.global.shared::cta.add.tile.bulk_group"          \
               " [%0, {" COORDS "}], [%1];\n"                                                          \
               ::"l"(reinterpret_cast<uint64_t>(desc)),                                                \
                 "r"(static_cast<uint32_t>(__cvta_generic_to_shared(base + offset))), __VA_ARGS__      \
               : "memory")
template <class T>
TC_DEVICE void tma_reduce_add_tile(const T* base, int offset, const TmaDesc* desc, int c0, int c1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  TC_TMA_REDUCE(2, "%2, %3", "r"(c0), "r"(c1));
#endif
}
template <class T>
TC_DEVICE void tma_reduce_add_tile(const T* base, int offset, const TmaDesc* desc, int c0, int c1, int c2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  TC_TMA_REDUCE(3, "%2, %3, %4", "r"(c0), "r"(c1), "r"(c2));
#endif
}
template <class T>
TC_DEVICE void tma_reduce_add_tile(const T* base, int offset, const TmaDesc* desc, int c0, int c1, int c2,
                                   int c3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  TC_TMA_REDUCE(4, "%2, %3, %4, %5", "r"(c0), "r"(c1), "r"(c2), "r"(c3));
#endif
}
template <class T>
TC_DEVICE void tma_reduce_add_tile(const T* base, int offset, const TmaDesc* desc, int c0, int c1, int c2,
                                   int c3, int c4) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  TC_TMA_REDUCE(5, "%2, %3, %4, %5, %6", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4));
#endif
}
#undef TC_TMA_REDUCE

// Close this thread's bulk group and wait until its bulk reduces have read their shared bytes
// (READ_ONLY: the tile may be overwritten; the adds complete in L2 later, before the kernel ends) or
// until they have completed (the kernel reads the destination afterwards).
template <bool READ_ONLY>
TC_DEVICE void bulk_commit_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (READ_ONLY) {
    asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
  } else {
    asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group 0;\n" ::: "memory");
  }
#endif
}

// The deferred form (transform/place_bulk_waits.py): close the group after the rows are issued, and wait
// for their shared-memory reads only before the tile is written again (and before the block exits), so
// the TMA unit reads and sends the rows while the block computes.
TC_DEVICE void bulk_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
TC_DEVICE void bulk_wait_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}

}  // namespace tc

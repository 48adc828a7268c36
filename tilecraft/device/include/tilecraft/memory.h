// tilecraft/memory.h — vectorised loads/stores and block-level synchronisation.
//
// A 128-bit access moves 16 bytes per thread in one instruction (LDG.E.128 / LDS.128), which is
// what saturates DRAM and shared-memory bandwidth; 64- and 32-bit forms serve narrower tiles.
// Constraint: the address must be aligned to the access width (16/8/4 bytes) — a misaligned
// vector access faults.  The code generator only emits these when it has proved alignment.
//
// The helpers are plain C++ dereferences, not inline asm: the compiler then still sees the memory
// access (it can schedule it, and knows it cannot be moved across __syncthreads()), and it picks
// LDG/LDS/generic LD from the pointer's provenance (a pointer derived from a __shared__ array
// compiles to LDS).  They work for global and shared memory alike.
#pragma once

#include "common.h"

namespace tc {

// 128-bit
TC_DEVICE uint4 ld128(const void* ptr) { return *reinterpret_cast<const uint4*>(ptr); }
TC_DEVICE void st128(void* ptr, const uint4& v) { *reinterpret_cast<uint4*>(ptr) = v; }
// 64-bit
TC_DEVICE uint2 ld64(const void* ptr) { return *reinterpret_cast<const uint2*>(ptr); }
TC_DEVICE void st64(void* ptr, const uint2& v) { *reinterpret_cast<uint2*>(ptr) = v; }
// 32-bit
TC_DEVICE uint32_t ld32(const void* ptr) { return *reinterpret_cast<const uint32_t*>(ptr); }
TC_DEVICE void st32(void* ptr, uint32_t v) { *reinterpret_cast<uint32_t*>(ptr) = v; }

// Read-only global loads through the non-coherent (texture) path: only valid when no thread of
// the kernel writes the location during the kernel's lifetime.
TC_DEVICE uint4 ldg128(const void* ptr) { return __ldg(reinterpret_cast<const uint4*>(ptr)); }
TC_DEVICE uint2 ldg64(const void* ptr) { return __ldg(reinterpret_cast<const uint2*>(ptr)); }
TC_DEVICE uint32_t ldg32(const void* ptr) {
  return __ldg(reinterpret_cast<const unsigned int*>(ptr));
}

// Copy Bytes (16, 8 or 4) from src to dst with one vector load and one vector store.
template <int Bytes>
TC_DEVICE void copy_vec(void* dst, const void* src) {
  static_assert(Bytes == 16 || Bytes == 8 || Bytes == 4, "vector width must be 4, 8 or 16 bytes");
  if constexpr (Bytes == 16) {
    st128(dst, ld128(src));
  } else if constexpr (Bytes == 8) {
    st64(dst, ld64(src));
  } else {
    st32(dst, ld32(src));
  }
}

// Block-wide barrier; also orders shared-memory accesses of the block (bar.sync 0).
TC_DEVICE void sync_threads() { __syncthreads(); }

// Warp-wide barrier among the lanes in mask (needed since Volta's independent thread scheduling
// no longer keeps a warp in lock-step).
TC_DEVICE void sync_warp(unsigned mask = 0xffffffffu) { __syncwarp(mask); }

// Named barrier over a subset of warps: `nthreads` (a multiple of 32) threads sync on barrier
// `id` (0..15; id 0 is the one __syncthreads() uses).  Lets producer/consumer warp groups sync
// without stalling the whole block.
TC_DEVICE void named_barrier_sync(int id, int nthreads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}
template <int ID, int THREADS>
TC_DEVICE void named_barrier_sync() {  // T.sync_threads(ID, THREADS)
  asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}
// T.named_barrier_arrive(ID, THREADS): arrive without waiting (a producer signalling consumers
// that bar.sync the same id with the same count).
template <int ID, int THREADS>
TC_DEVICE void named_barrier_arrive() {
  asm volatile("bar.arrive %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}

}  // namespace tc

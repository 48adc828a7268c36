// tilecraft/cp_async.h — asynchronous global->shared copies (cp.async, "LDGSTS"), sm_80+.
//
// cp.async copies from global to shared memory without passing through registers, so loads for
// stage k+1 of a software pipeline overlap the math on stage k.  Copies are grouped per thread:
// cp_async_commit() closes the current group, cp_async_wait<N>() blocks until at most N of this
// thread's groups are still in flight.  The wait only covers the calling thread's own copies, so
// a __syncthreads() must follow it before other threads read the tile.
//
// Constraints:
//   - sm_80+ only (the instruction does not exist before Ampere).
//   - dst (shared) and src (global) must both be aligned to the copy size (4, 8 or 16 bytes);
//     a misaligned address is undefined (in practice a misaligned-address fault).
//   - .cg (cache at L2 only, bypass L1) is only allowed for 16-byte copies; 4/8-byte copies must
//     use .ca.  Streaming tiles through .cg keeps L1 free for other data.
//   - Predication uses the src-size operand: when pred is false src-size is 0, no global byte is
//     read and the whole destination is zero-filled — this is how ragged tile edges become zeros.
//     Because nothing is read, the source address need not be valid in that case.
#pragma once

#include "common.h"

namespace tc {

namespace detail {
TC_DEVICE uint32_t cp_async_smem_addr(const void* ptr) {
  // cp.async's destination operand is a 32-bit shared-state-space address.
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}
}  // namespace detail

// 16 bytes global -> shared, L2-only caching; zero-fills the destination when pred is false.
TC_DEVICE void cp_async_16(void* smem_ptr, const void* gmem_ptr, bool pred = true) {
  const int src_size = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :
               : "r"(detail::cp_async_smem_addr(smem_ptr)), "l"(gmem_ptr), "r"(src_size)
               : "memory");
}

// 8 bytes global -> shared (.ca: .cg is 16-byte only); zero-fills when pred is false.
TC_DEVICE void cp_async_8(void* smem_ptr, const void* gmem_ptr, bool pred = true) {
  const int src_size = pred ? 8 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n"
               :
               : "r"(detail::cp_async_smem_addr(smem_ptr)), "l"(gmem_ptr), "r"(src_size)
               : "memory");
}

// 4 bytes global -> shared (.ca); zero-fills when pred is false.
TC_DEVICE void cp_async_4(void* smem_ptr, const void* gmem_ptr, bool pred = true) {
  const int src_size = pred ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
               :
               : "r"(detail::cp_async_smem_addr(smem_ptr)), "l"(gmem_ptr), "r"(src_size)
               : "memory");
}

// Close the current group of this thread's cp.async operations (an empty group is legal and
// completes immediately, so pipelines may commit unconditionally every iteration).
TC_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Wait until at most N committed groups of this thread are pending.  N must be a compile-time
// constant (it is an immediate operand).  The "memory" clobber stops the compiler from hoisting
// shared-memory reads above the wait.
template <int N>
TC_DEVICE void cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative immediate");
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Wait for all of this thread's cp.async operations, committed or not.
TC_DEVICE void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace tc

// tilecraft/pipeline.h — the two protocols of a software-pipelined main loop (sm_80+), as used by
// transform/pipeline_copies.py.  Each k-tile t lives in stage t % S of S shared buffers; copies
// for tile t + S - 1 are issued while tile t is computed on.
//
// 1. Block barrier (PipelineBarrier<N>): wait until this thread has at most N cp.async groups in
//    flight, then __syncthreads().  After it every thread's copies of the next tile are visible
//    and every warp has finished reading the stage the next copies overwrite.  Cheap when two or
//    more blocks share an SM (one fills the other's barrier bubble).
//
// 2. Per-stage mbarriers (pipe_*): full[s] completes when every thread's copies of the tile in
//    stage s have landed (cp.async.mbarrier.arrive: the hardware arrives for the thread once its
//    earlier cp.asyncs complete); empty[s] completes when every thread has finished reading it.
//    A warp waits only for the stage it needs, so warps may drift up to S-1 tiles apart: better
//    when one block fills the SM and a block-wide barrier would leave it idle.
//
// Both are called by tc::gemm_ss as its "hook": after the last k16 step's fragments are in
// registers, before that step's mmas.
//
// mbarrier constraints (PTX ISA): the object is 8 bytes, 8-byte aligned, in shared memory;
// init before any use and a barrier between init and use; a phase completes when its expected
// arrival count is reached; waiting names the parity of the phase to wait for (tile t uses phase
// t / S of its stage, so parity (t / S) & 1); invalidate before the bytes are used for anything
// else.  cp.async.mbarrier.arrive and mbarrier.test_wait are sm_80+, mbarrier.try_wait sm_90+.
#pragma once

#include "common.h"
#include "cp_async.h"

namespace tc {

template <int N>
struct PipelineBarrier {
  TC_DEVICE void operator()() const {
    cp_async_wait<N>();
    __syncthreads();
  }
};

namespace detail {
// The shared-window address of barrier i: one generic->shared conversion of the base, then 32-bit
// arithmetic (cheaper in registers than converting each 64-bit pointer).
TC_DEVICE uint32_t mbar_addr(const uint64_t* bar, int i = 0) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(bar)) + 8u * static_cast<uint32_t>(i);
}

TC_DEVICE void mbar_init_at(uint32_t addr, int count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
}

TC_DEVICE void mbar_inval_at(uint32_t addr) {
  asm volatile("mbarrier.inval.shared.b64 [%0];\n" ::"r"(addr) : "memory");
}

TC_DEVICE void mbar_wait(uint32_t addr, int parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred p;\n TC_MBAR_WAIT%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra TC_MBAR_WAIT%=;\n}\n"
      ::"r"(addr), "r"(parity) : "memory");
#else
  asm volatile(
      "{\n .reg .pred p;\n TC_MBAR_WAIT%=:\n"
      " mbarrier.test_wait.parity.shared.b64 p, [%0], %1;\n @!p bra TC_MBAR_WAIT%=;\n}\n"
      ::"r"(addr), "r"(parity) : "memory");
#endif
}
}  // namespace detail

// bar[0..S) = full, bar[S..2S) = empty, each expecting `count` arrivals (every thread of the
// block) per phase.  Thread 0 initialises; the caller puts a block barrier after this.
template <int S>
TC_DEVICE void pipe_init(uint64_t* bar, int count) {
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
#pragma unroll
    for (int i = 0; i < 2 * S; ++i) detail::mbar_init_at(detail::mbar_addr(bar, i), count);
  }
}

// Before issuing the copies of tile t: wait until everyone has read tile t - S (same stage).
template <int S>
TC_DEVICE void pipe_acquire(uint64_t* bar, int t) {
  if (t >= S) detail::mbar_wait(detail::mbar_addr(bar, S + t % S), ((t / S) - 1) & 1);
}

// After issuing the copies of tile t: full[t % S] gets this thread's arrival when they land.
template <int S>
TC_DEVICE void pipe_commit(uint64_t* bar, int t) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(detail::mbar_addr(bar, t % S)) : "memory");
}

// Before reading tile t: wait until all of its copies have landed.
template <int S>
TC_DEVICE void pipe_wait(uint64_t* bar, int t) {
  detail::mbar_wait(detail::mbar_addr(bar, t % S), (t / S) & 1);
}

// gemm_ss hook: this thread has read tile t (arrive has release semantics: its shared-memory
// reads are ordered before the arrival).
template <int S>
struct PipeRelease {
  uint64_t* bar;
  int t;
  TC_DEVICE PipeRelease(uint64_t* bar_, int t_) : bar(bar_), t(t_) {}
  TC_DEVICE void operator()() const {
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared.b64 st, [%0];\n}\n"
                 ::"r"(detail::mbar_addr(bar, S + t % S)) : "memory");
  }
};

// After the loop (and a block barrier): thread 0 invalidates the barriers so their bytes may be
// reused; the caller puts a block barrier after this.
template <int S>
TC_DEVICE void pipe_inval(uint64_t* bar) {
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
#pragma unroll
    for (int i = 0; i < 2 * S; ++i) detail::mbar_inval_at(detail::mbar_addr(bar, i));
  }
}

}  // namespace tc

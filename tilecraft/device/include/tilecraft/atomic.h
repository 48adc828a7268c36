// tilecraft/atomic.h — atomic add/max/min on global or shared memory, dispatched by type.
//
// Each function returns the old value; when the caller ignores it the compiler emits the
// fire-and-forget RED instruction instead of ATOM (no round trip back to the SM).
// Hardware: float/int atomics everywhere, double add sm_60+, half add sm_70+, bf16 add sm_80+
// (on sm_80 bf16 add is a CAS loop inside cuda_bf16.hpp; native on sm_90), half2/bf162 add is
// one 32-bit atomic covering two adjacent elements (address must be 4-byte aligned).
#pragma once

#include "common.h"

namespace tc {

TC_DEVICE float atomic_add(float* addr, float v) { return atomicAdd(addr, v); }
TC_DEVICE double atomic_add(double* addr, double v) { return atomicAdd(addr, v); }
TC_DEVICE int atomic_add(int* addr, int v) { return atomicAdd(addr, v); }
TC_DEVICE unsigned atomic_add(unsigned* addr, unsigned v) { return atomicAdd(addr, v); }
TC_DEVICE unsigned long long atomic_add(unsigned long long* addr, unsigned long long v) {
  return atomicAdd(addr, v);
}
// Signed 64-bit add is the unsigned add on the two's-complement bits.
TC_DEVICE long long atomic_add(long long* addr, long long v) {
  return static_cast<long long>(atomicAdd(reinterpret_cast<unsigned long long*>(addr),
                                          static_cast<unsigned long long>(v)));
}
TC_DEVICE half_t atomic_add(half_t* addr, half_t v) { return atomicAdd(addr, v); }
TC_DEVICE bfloat16_t atomic_add(bfloat16_t* addr, bfloat16_t v) { return atomicAdd(addr, v); }
TC_DEVICE __half2 atomic_add(__half2* addr, __half2 v) { return atomicAdd(addr, v); }
TC_DEVICE __nv_bfloat162 atomic_add(__nv_bfloat162* addr, __nv_bfloat162 v) {
  return atomicAdd(addr, v);
}
// Two adjacent 16-bit values at once (vectorised accumulation of half/bf16 tiles); addr must be
// 4-byte aligned because the pair is updated by a single 32-bit atomic.
TC_DEVICE void atomic_add_x2(half_t* addr, half_t lo, half_t hi) {
  atomicAdd(reinterpret_cast<__half2*>(addr), __halves2half2(lo, hi));
}
TC_DEVICE void atomic_add_x2(bfloat16_t* addr, bfloat16_t lo, bfloat16_t hi) {
  atomicAdd(reinterpret_cast<__nv_bfloat162*>(addr), __halves2bfloat162(lo, hi));
}

// Integer max/min are native.
TC_DEVICE int atomic_max(int* addr, int v) { return atomicMax(addr, v); }
TC_DEVICE int atomic_min(int* addr, int v) { return atomicMin(addr, v); }
TC_DEVICE unsigned atomic_max(unsigned* addr, unsigned v) { return atomicMax(addr, v); }
TC_DEVICE unsigned atomic_min(unsigned* addr, unsigned v) { return atomicMin(addr, v); }
TC_DEVICE long long atomic_max(long long* addr, long long v) { return atomicMax(addr, v); }
TC_DEVICE long long atomic_min(long long* addr, long long v) { return atomicMin(addr, v); }

// Float max/min without a CAS loop: IEEE floats of the same sign order like their bit patterns
// (as signed ints for non-negative values, reversed as unsigned ints for negative ones), so one
// integer atomic suffices.  The sign bit (not v >= 0) picks the path so -0.0 is handled; NaN
// inputs are not supported (the result is then unspecified).
TC_DEVICE float atomic_max(float* addr, float v) {
  return __float_as_int(v) >= 0
             ? __int_as_float(atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v)))
             : __uint_as_float(atomicMin(reinterpret_cast<unsigned*>(addr), __float_as_uint(v)));
}
TC_DEVICE float atomic_min(float* addr, float v) {
  return __float_as_int(v) >= 0
             ? __int_as_float(atomicMin(reinterpret_cast<int*>(addr), __float_as_int(v)))
             : __uint_as_float(atomicMax(reinterpret_cast<unsigned*>(addr), __float_as_uint(v)));
}

// Ordered loads and stores of one 32- or 64-bit element (T.atomic_load / T.atomic_store), at GPU
// scope, generic addressing (global or shared).  Order: 0 relaxed, 1 acquire (load) / release
// (store), 2 sequentially consistent (a fence.sc first).  sm_70+.
template <int Order, class T>
TC_DEVICE T atomic_load(const T* addr) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomic_load: 32- or 64-bit elements");
  if (Order == 2) asm volatile("fence.sc.gpu;" ::: "memory");
  if constexpr (sizeof(T) == 4) {
    unsigned v;
    if (Order == 0) asm volatile("ld.relaxed.gpu.b32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
    else asm volatile("ld.acquire.gpu.b32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
    return *reinterpret_cast<T*>(&v);
  } else {
    unsigned long long v;
    if (Order == 0) asm volatile("ld.relaxed.gpu.b64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
    else asm volatile("ld.acquire.gpu.b64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
    return *reinterpret_cast<T*>(&v);
  }
}
template <int Order, class T>
TC_DEVICE void atomic_store(T* addr, T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomic_store: 32- or 64-bit elements");
  if (Order == 2) asm volatile("fence.sc.gpu;" ::: "memory");
  if constexpr (sizeof(T) == 4) {
    const unsigned v = *reinterpret_cast<const unsigned*>(&value);
    if (Order == 0) asm volatile("st.relaxed.gpu.b32 [%0], %1;" :: "l"(addr), "r"(v) : "memory");
    else asm volatile("st.release.gpu.b32 [%0], %1;" :: "l"(addr), "r"(v) : "memory");
  } else {
    const unsigned long long v = *reinterpret_cast<const unsigned long long*>(&value);
    if (Order == 0) asm volatile("st.relaxed.gpu.b64 [%0], %1;" :: "l"(addr), "l"(v) : "memory");
    else asm volatile("st.release.gpu.b64 [%0], %1;" :: "l"(addr), "l"(v) : "memory");
  }
}

}  // namespace tc

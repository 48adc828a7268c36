// Vectorised element moves between memory and registers, with conversion.
//
// Global memory is fastest with 16-byte accesses per thread (one LDG.E.128 instead of four or
// eight narrow loads), so a copy of V consecutive elements goes through an aligned struct of
// V elements.  The code generator only emits these when it has proved the address is aligned to
// V * sizeof(element) and the whole vector is inside (or outside) the tensor.
#pragma once
#include "common.h"
#include "cp_async.h"

namespace tc {

template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// d[0..V) = convert(p[0..V)) when pred, else zeros (ragged edges read as zero).
template <class D, class S, int V>
TC_DEVICE void vec_load_zfill(D* d, const S* p, bool pred) {
  static_assert(sizeof(S) * V <= 16, "at most 16 bytes per vector access");
  if (pred) {
    Pack<S, V> t = *reinterpret_cast<const Pack<S, V>*>(p);
#pragma unroll
    for (int i = 0; i < V; ++i) d[i] = cast<D>(t.v[i]);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) d[i] = cast<D>(0.0f);
  }
}

namespace detail {
// float pairs -> packed 16-bit floats with one cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32 (half the
// conversions of two scalar casts).  Also keeps ptxas from serialising an asynchronous wgmma
// loop whose accumulators are stored this way: scalar float->half conversions of accumulators
// after the loop made it report C7514 and wait after every wgmma (found 2026-11-29).
template <class D> struct PairCvt { static constexpr bool ok = false; };
template <> struct PairCvt<half_t> {
  static constexpr bool ok = true;
  static TC_DEVICE half2_t run(float a, float b) { return __floats2half2_rn(a, b); }
};
template <> struct PairCvt<bfloat16_t> {
  static constexpr bool ok = true;
  static TC_DEVICE bfloat162_t run(float a, float b) { return __floats2bfloat162_rn(a, b); }
};
}  // namespace detail

#if defined(TC_FP8)
namespace detail {
// Widening 8-bit floats without the conversion pipe.  The scalar path (fp8 -> f16 -> f32 -> bf16) is three
// F2F-class instructions an element on a quarter-rate pipe: an fp8 KV tile's widening cost MLA decode more
// than its gemms (H200, session 28: the split kernel 200 us, 122 us with the widening left out).
//
// Four e4m3 (one word, element 0 in the low byte) -> four bf16 (lo: elements 0, 1; hi: 2, 3), exactly: each
// byte's seven magnitude bits become a bf16's low four exponent bits and top three mantissa bits (the value
// times 2^-120: e4m3's exponent bias is 7, bf16's 127), the sign goes on top, and one bf16x2 multiply by
// 2^120 restores the scale (e4m3's subnormals are bf16 subnormals before it and normal after it; zeros keep
// their sign).  e4m3fn's NaN (magnitude 0x7F; it has no infinity) would come out as 480, so a NaN byte's
// lanes are then set to all ones (a NaN), without a branch: the bytes' "magnitude + 1" reaches bit 7 only
// for 0x7F, and PRMT's sign-replicating selectors spread that bit over the lane.
TC_DEVICE void e4m3x4_to_bf16x4(uint32_t w, uint32_t& lo, uint32_t& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t mag = w & 0x7F7F7F7Fu;
  const uint32_t nan = mag + 0x01010101u;
  const uint32_t a = (__byte_perm(mag, 0u, 0x4140) << 4) | (__byte_perm(w, 0u, 0x1404) & 0x80008000u);
  const uint32_t b = (__byte_perm(mag, 0u, 0x4342) << 4) | (__byte_perm(w, 0u, 0x3424) & 0x80008000u);
  const uint32_t two120 = 0x7B807B80u, neg_zero = 0x80008000u;   // bf16x2 {2^120, 2^120}, {-0, -0}
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(lo) : "r"(a), "r"(two120), "r"(neg_zero));
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(hi) : "r"(b), "r"(two120), "r"(neg_zero));
  lo |= __byte_perm(nan, 0u, 0x9988);
  hi |= __byte_perm(nan, 0u, 0xBBAA);
#endif
}

// Which conversions have a path faster than element-wise casts here (widen_fp8).
template <class D, class S, int V>
struct FastWiden {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  static constexpr bool bf16 = IsSameType<D, bfloat16_t>::value && IsSameType<S, fp8_e4m3_t>::value && V % 4 == 0;
#else
  static constexpr bool bf16 = false;
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  static constexpr bool f16 = IsSameType<D, half_t>::value && IsSameType<S, fp8_e4m3_t>::value && V % 2 == 0;
#else
  static constexpr bool f16 = false;
#endif
  static constexpr bool value = bf16 || f16;
};

template <class D, class S, int V>
TC_DEVICE void widen_fp8(Pack<D, V>& t, const Pack<S, V>& in) {
  static_assert(FastWiden<D, S, V>::value, "widen_fp8: no fast path for these types here");
  if constexpr (FastWiden<D, S, V>::bf16) {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(in.v);
    uint32_t* o = reinterpret_cast<uint32_t*>(t.v);
#pragma unroll
    for (int i = 0; i < V / 4; ++i) e4m3x4_to_bf16x4(w[i], o[2 * i], o[2 * i + 1]);
  } else {   // e4m3 -> f16: one cvt.rn.f16x2.e4m3x2 a pair (exact, NaN kept), not one a byte
    const unsigned short* h = reinterpret_cast<const unsigned short*>(in.v);
    uint32_t* o = reinterpret_cast<uint32_t*>(t.v);
#pragma unroll
    for (int i = 0; i < V / 2; ++i) asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(o[i]) : "h"(h[i]));
  }
}
}  // namespace detail
#endif

// p[0..V) = convert(s[0..V)) as one aligned store.
template <class D, class S, int V>
TC_DEVICE void vec_store(D* p, const S* s) {
  static_assert(sizeof(D) * V <= 16, "at most 16 bytes per vector access");
  Pack<D, V> t;
#if defined(TC_FP8)
  if constexpr (detail::FastWiden<D, S, V>::value) {
    Pack<S, V> in;
#pragma unroll
    for (int i = 0; i < V; ++i) in.v[i] = s[i];
    detail::widen_fp8<D, S, V>(t, in);
  } else
#endif
  if constexpr (IsSameType<S, float>::value && detail::PairCvt<D>::ok && V % 2 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 2) {
      const auto h2 = detail::PairCvt<D>::run(s[i], s[i + 1]);
      t.v[i] = h2.x;
      t.v[i + 1] = h2.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) t.v[i] = cast<D>(s[i]);
  }
  *reinterpret_cast<Pack<D, V>*>(p) = t;
}

// p[0..V) = convert(s[0..V)): one aligned vector load and one aligned vector store (memory to memory; both
// start at a multiple of V elements).  !pred: s is past its tensor's edge (never read), p gets zeros.
template <class D, class S, int V>
TC_DEVICE void vec_convert(D* p, const S* s, bool pred = true) {
  static_assert(sizeof(D) * V <= 16 && sizeof(S) * V <= 16, "at most 16 bytes per vector access");
  Pack<D, V> t;
  if (pred) {
    const Pack<S, V> in = *reinterpret_cast<const Pack<S, V>*>(s);
#if defined(TC_FP8)
    if constexpr (detail::FastWiden<D, S, V>::value) {
      detail::widen_fp8<D, S, V>(t, in);
    } else
#endif
    {
#pragma unroll
      for (int i = 0; i < V; ++i) t.v[i] = cast<D>(in.v[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) t.v[i] = D(0);
  }
  *reinterpret_cast<Pack<D, V>*>(p) = t;
}

// 16/8/4-byte asynchronous global->shared copy; !pred zero-fills the destination (ragged edges).
template <int N>
TC_DEVICE void cp_async_zfill(void* smem, const void* gmem, bool pred) {
  static_assert(N == 16 || N == 8 || N == 4, "cp.async moves 4, 8 or 16 bytes");
  if (N == 16) cp_async_16(smem, gmem, pred);
  else if (N == 8) cp_async_8(smem, gmem, pred);
  else cp_async_4(smem, gmem, pred);
}

// Same, issued inside a software pipeline: the pipeline's own wait + barrier completes it.
template <int N>
TC_DEVICE void cp_async_pipelined_zfill(void* smem, const void* gmem, bool pred) {
  cp_async_zfill<N>(smem, gmem, pred);
}

}  // namespace tc

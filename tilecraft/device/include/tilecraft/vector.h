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
    if constexpr (IsSameType<D, S>::value) {
      memcpy(d, &t, sizeof(t));   // the vector as it is (d: registers of any alignment), not element by element
      return;
    }
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
// Widening e4m3 pairs: one cvt.rn.f16x2.e4m3x2 a pair (exact, NaN kept) instead of one a byte, then for
// bf16 the f16 pair through f32 (exact) into one cvt.rn.bf16x2.f32.  The element-wise casts (fp8 -> f16 ->
// f32 -> bf16, one conversion each) made an fp8 KV tile's widening cost MLA decode more than its gemms; on
// the H200 (session 28, B64 H16 KV8192, split kernel): element-wise 199 us, pairs 173 us, and 162 us with
// the copy staged through registers (transform/cuda_ops/copy.py).  A bit-trick form (bytes placed as bf16
// exponent and mantissa bits, one bf16x2 multiply by 2^120, NaN patched branch-free) was exact but slower
// still (215-235 us): more instructions than the conversions it replaced.
template <class D, class S, int V>
struct FastWiden {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  static constexpr bool value = (IsSameType<D, half_t>::value || IsSameType<D, bfloat16_t>::value)
                                && IsSameType<S, fp8_e4m3_t>::value && V % 2 == 0;
#else
  static constexpr bool value = false;
#endif
};

template <class D, class S, int V>
TC_DEVICE void widen_fp8(Pack<D, V>& t, const Pack<S, V>& in) {
  static_assert(FastWiden<D, S, V>::value, "widen_fp8: no fast path for these types here");
  static_assert(sizeof(in) == V && sizeof(t) == 2 * V, "widen_fp8: packed 8-bit in, 16-bit out");
  // words in and out by memcpy (bit copies the compiler keeps in registers), not through a uint32_t*
  // onto the fp8 / bf16 objects (an aliasing violation the optimiser may act on)
  unsigned short h[V / 2];
  uint32_t o[V / 2];
  memcpy(h, &in, sizeof(h));
#pragma unroll
  for (int i = 0; i < V / 2; ++i) asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(o[i]) : "h"(h[i]));
  if constexpr (IsSameType<D, bfloat16_t>::value) {
#pragma unroll
    for (int i = 0; i < V / 2; ++i) {
      half2_t h2;
      memcpy(&h2, &o[i], 4);
      const float2 f = __half22float2(h2);
      const bfloat162_t b = __floats2bfloat162_rn(f.x, f.y);
      memcpy(&o[i], &b, 4);
    }
  }
  memcpy(&t, o, sizeof(o));
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
    memcpy(&in, s, sizeof(in));   // s: a register array of bytes (a staged converting copy), any alignment
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

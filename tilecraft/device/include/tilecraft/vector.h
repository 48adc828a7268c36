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

// p[0..V) = convert(s[0..V)) as one aligned store.
template <class D, class S, int V>
TC_DEVICE void vec_store(D* p, const S* s) {
  static_assert(sizeof(D) * V <= 16, "at most 16 bytes per vector access");
  Pack<D, V> t;
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
#pragma unroll
    for (int i = 0; i < V; ++i) t.v[i] = cast<D>(in.v[i]);
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

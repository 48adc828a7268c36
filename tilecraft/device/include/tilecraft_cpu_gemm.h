// tilecraft CPU target: the tile GEMM `C += op(A) @ op(B)` with float32 accumulation.
//
// Semantics (the reference every other path is held to; codegen/cpp.py emits the call for a
// T.gemm whose accumulator type is float32, transform/lower_tile_ops_cpu.py):
//   for each (i, j):  acc = float(C[i, j]);  for k = 0 .. K-1 in order:  acc = acc + a(i,k) * b(k,j);
//                     C[i, j] = TC(acc)
// each product and each sum rounded to float32 (no fused multiply-add: -ffp-contract=off), and C
// rounded once per call: a float32 C is bitwise what the scalar triple loop gives; a float16 /
// bfloat16 / fp8 C is rounded once per T.gemm call, as the CUDA target's fallback does (not per
// multiply-add).
//
// Speed: B is converted to float32 once per call into packed panels (NR columns k-major,
// zero-padded); A is read in place when it is float32 and M fills whole micro-tiles, else converted
// once into a row-major float copy; then a register-blocked micro-kernel (MR x NR accumulators in
// GCC vector registers: AVX2 with -march=native) walks K for each MR x NR tile of C, broadcasting
// A's elements.  The conversions run over contiguous runs of the operands (rows of A, rows or
// columns of B), which vectorize.
#pragma once
#include <cstdint>
#include <cstdlib>

namespace tc {

typedef float f32x8 __attribute__((vector_size(32)));

// per-thread packing storage, grown on demand (blocks run on OpenMP threads)
struct GemmScratch {
  float* p = nullptr;
  int64_t n = 0;
  float* get(int64_t want) {
    if (want > n) {
      std::free(p);
      p = (float*)std::aligned_alloc(64, (size_t)((want * 4 + 63) / 64 * 64));
      n = want;
    }
    return p;
  }
  ~GemmScratch() { std::free(p); }
};
static inline GemmScratch& gemm_scratch(int which) {
  static thread_local GemmScratch s[3];
  return s[which];
}

constexpr int GEMM_MR = 4, GEMM_NR = 16;  // 8 accumulators + 2 B vectors + A + products: 16 AVX registers

// one MR x NR tile of C over all K: A's element (r, k) at a[r * lda + k * ka], bp = K x NR (k-major),
// C's element (r, c) at ct[r * ldc + c]
static inline void gemm_micro(int64_t K, const float* __restrict__ a, int64_t lda, int64_t ka,
                              const float* __restrict__ bp, float* __restrict__ ct, int64_t ldc) {
  f32x8 c00, c01, c10, c11, c20, c21, c30, c31;
  __builtin_memcpy(&c00, ct + 0, 32); __builtin_memcpy(&c01, ct + 8, 32);
  __builtin_memcpy(&c10, ct + ldc, 32); __builtin_memcpy(&c11, ct + ldc + 8, 32);
  __builtin_memcpy(&c20, ct + 2 * ldc, 32); __builtin_memcpy(&c21, ct + 2 * ldc + 8, 32);
  __builtin_memcpy(&c30, ct + 3 * ldc, 32); __builtin_memcpy(&c31, ct + 3 * ldc + 8, 32);
  const float *ar0 = a, *ar1 = a + lda, *ar2 = a + 2 * lda, *ar3 = a + 3 * lda;
  for (int64_t k = 0; k < K; ++k) {
    f32x8 b0, b1;
    __builtin_memcpy(&b0, bp + k * GEMM_NR, 32);
    __builtin_memcpy(&b1, bp + k * GEMM_NR + 8, 32);
    const int64_t o = k * ka;
    const f32x8 a0 = ar0[o] - (f32x8){}, a1 = ar1[o] - (f32x8){};  // broadcasts (x - 0 is x, -0 included)
    c00 += a0 * b0; c01 += a0 * b1;
    c10 += a1 * b0; c11 += a1 * b1;
    const f32x8 a2 = ar2[o] - (f32x8){}, a3 = ar3[o] - (f32x8){};
    c20 += a2 * b0; c21 += a2 * b1;
    c30 += a3 * b0; c31 += a3 * b1;
  }
  __builtin_memcpy(ct + 0, &c00, 32); __builtin_memcpy(ct + 8, &c01, 32);
  __builtin_memcpy(ct + ldc, &c10, 32); __builtin_memcpy(ct + ldc + 8, &c11, 32);
  __builtin_memcpy(ct + 2 * ldc, &c20, 32); __builtin_memcpy(ct + 2 * ldc + 8, &c21, 32);
  __builtin_memcpy(ct + 3 * ldc, &c30, 32); __builtin_memcpy(ct + 3 * ldc + 8, &c31, 32);
}

// C (M x N, element (i, j) at C[i * crs + j * ccs]) += A (a(i, k) at A[i * ars + k * acs]) @
// B (b(k, j) at B[k * brs + j * bcs]); the strides fold T.gemm's transposes and regions in.
template <class T> struct gemm_is_f32 { static constexpr bool value = false; };
template <> struct gemm_is_f32<float> { static constexpr bool value = true; };

// n contiguous elements as float (a loop that vectorizes)
template <class T> static inline void gemm_to_f32(const T* __restrict__ s, float* __restrict__ d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = (float)s[i];
}

template <class TA, class TB, class TC>
static void gemm_f32acc(int64_t M, int64_t N, int64_t K, const TA* A, int64_t ars, int64_t acs,
                        const TB* B, int64_t brs, int64_t bcs, TC* C, int64_t crs, int64_t ccs) {
  const int64_t mb = (M + GEMM_MR - 1) / GEMM_MR, nb = (N + GEMM_NR - 1) / GEMM_NR;
  // A as float: element (i, k) at af[i * lda + k * ka]
  const float* af;
  int64_t lda, ka;
  if (gemm_is_f32<TA>::value && M % GEMM_MR == 0) {
    af = (const float*)(const void*)A; lda = ars; ka = acs;
  } else {  // a row-major copy, rows past M zero
    float* __restrict__ t = gemm_scratch(0).get(mb * GEMM_MR * K);
    for (int64_t i = 0; i < M; ++i) {
      if (acs == 1) gemm_to_f32(A + i * ars, t + i * K, K);
      else for (int64_t k = 0; k < K; ++k) t[i * K + k] = (float)A[i * ars + k * acs];
    }
    for (int64_t i = M * K; i < mb * GEMM_MR * K; ++i) t[i] = 0.0f;
    af = t; lda = K; ka = 1;
  }
  // B packed: panel jb holds columns jb*NR .. jb*NR+NR-1, k-major, zero past N
  float* __restrict__ bp = gemm_scratch(1).get(nb * GEMM_NR * K);
  if (bcs == 1) {  // rows of B are contiguous: convert NR at a time
    for (int64_t jb = 0; jb < nb; ++jb) {
      const int64_t nc = N - jb * GEMM_NR < GEMM_NR ? N - jb * GEMM_NR : GEMM_NR;
      for (int64_t k = 0; k < K; ++k) {
        float* __restrict__ d = bp + (jb * K + k) * GEMM_NR;
        const TB* s = B + k * brs + jb * GEMM_NR;
        if (nc == GEMM_NR) gemm_to_f32(s, d, GEMM_NR);
        else for (int c = 0; c < GEMM_NR; ++c) d[c] = c < nc ? (float)s[c] : 0.0f;
      }
    }
  } else {  // convert column j (contiguous when brs == 1, as for a transposed B), then place it
    float* __restrict__ col = gemm_scratch(2).get(K);
    for (int64_t jb = 0; jb < nb; ++jb)
      for (int c = 0; c < GEMM_NR; ++c) {
        const int64_t j = jb * GEMM_NR + c;
        float* __restrict__ d = bp + jb * K * GEMM_NR + c;
        if (j >= N) {
          for (int64_t k = 0; k < K; ++k) d[k * GEMM_NR] = 0.0f;
          continue;
        }
        if (brs == 1) gemm_to_f32(B + j * bcs, col, K);
        else for (int64_t k = 0; k < K; ++k) col[k] = (float)B[k * brs + j * bcs];
        for (int64_t k = 0; k < K; ++k) d[k * GEMM_NR] = col[k];
      }
  }
  alignas(32) float ct[GEMM_MR * GEMM_NR];
  for (int64_t jb = 0; jb < nb; ++jb) {
    const int64_t nc = N - jb * GEMM_NR < GEMM_NR ? N - jb * GEMM_NR : GEMM_NR;
    for (int64_t ib = 0; ib < mb; ++ib) {
      const int64_t mr = M - ib * GEMM_MR < GEMM_MR ? M - ib * GEMM_MR : GEMM_MR;
      TC* c0 = C + ib * GEMM_MR * crs + jb * GEMM_NR * ccs;
      if (gemm_is_f32<TC>::value && ccs == 1 && mr == GEMM_MR && nc == GEMM_NR) {  // a whole float32 tile in place
        gemm_micro(K, af + ib * GEMM_MR * lda, lda, ka, bp + jb * K * GEMM_NR, (float*)(void*)c0, crs);
        continue;
      }
      for (int r = 0; r < GEMM_MR; ++r)
        for (int c = 0; c < GEMM_NR; ++c)
          ct[r * GEMM_NR + c] = (r < mr && c < nc) ? (float)c0[r * crs + c * ccs] : 0.0f;
      gemm_micro(K, af + ib * GEMM_MR * lda, lda, ka, bp + jb * K * GEMM_NR, ct, GEMM_NR);
      for (int64_t r = 0; r < mr; ++r)
        for (int64_t c = 0; c < nc; ++c) c0[r * crs + c * ccs] = TC(ct[r * GEMM_NR + c]);
    }
  }
}

}  // namespace tc

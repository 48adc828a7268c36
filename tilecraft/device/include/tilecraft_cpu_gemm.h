// tilecraft CPU target: the tile GEMM `C += op(A) @ op(B)` with float32 accumulation.
//
// Semantics (the reference every other path is held to; codegen/cpp.py emits the call for a
// T.gemm whose accumulator type is float32, transform/lower_tile_ops_cpu.py, except when A and B are
// both bfloat16: tc::gemm_bf16 in tilecraft_cpu_gemm_bf16.h, whose k order takes pairs, odd k first):
//   for each (i, j):  acc = float(C[i, j]);  for k = 0 .. K-1 in order:  acc = fma(a(i,k), b(k,j), acc);
//                     C[i, j] = TC(acc)
// each step a fused multiply-add rounded to float32 (the CUDA target's fallback gemm is this chain:
// NVRTC contracts its acc + a * b into FFMA), and C rounded once per call: a float32 C is bitwise
// what the scalar triple loop of lower_tile_ops_cpu.py gives (tc::fma); a float16 /
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

// The micro-kernel's vectors: 16 floats where AVX-512 is there (two zmm registers per row of a
// tile, 8 rows: 16 accumulators; one per row measured 1.2-1.25x the AVX2 form on FlashAttention's
// 64x64x128 tiles), else 8 (two per row, 4 rows).  The tile is GEMM_NR = 32 / 16 columns; each element
// of C is the same chain of fused multiply-adds in k order, so the results do not depend on
// the form.
#if defined(__AVX512F__)
// two zmm vectors per row (an 8 x 32 tile, 16 accumulators): each broadcast of A feeds two fused
// multiply-adds.  Session 20, one thread, thread CPU time, beside the one-vector form: FlashAttention
// 64-66 -> 50-52 ms, GEMM fp32 512^3 4.6-5.0 -> 3.5-3.7 ms, fp16 4.2-6.3 -> 3.4 ms
// (-DTC_GEMM_NV512=1 builds the one-vector form, for such comparisons)
#ifndef TC_GEMM_NV512
#define TC_GEMM_NV512 2
#endif
constexpr int GEMM_VW = 16, GEMM_NV = TC_GEMM_NV512, GEMM_MR = 8;
#else
constexpr int GEMM_VW = 8, GEMM_NV = 2, GEMM_MR = 4;
#endif
constexpr int GEMM_NR = GEMM_VW * GEMM_NV;
typedef float f32xv __attribute__((vector_size(GEMM_VW * 4)));

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

// c + a * b rounded once, lane by lane: vfmadd where the machine has it, libm's exact fma elsewhere.
// Each step of the chain is a fused multiply-add, as the CUDA target's fallback gemm (NVRTC contracts its
// `acc + a * b` into FFMA); with 16- and 8-bit inputs the products are exact, so fused or not is the same bits.
static inline f32xv gemm_fma(f32xv a, f32xv b, f32xv c) {
#if defined(__AVX512F__)
  return __builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)0xffff, 4);
#elif defined(__FMA__)
  return __builtin_ia32_vfmaddps256(a, b, c);
#else
  f32xv r;
  for (int i = 0; i < GEMM_VW; ++i) r[i] = __builtin_fmaf(a[i], b[i], c[i]);
  return r;
#endif
}

// an MR x NR tile of C (row stride ldc) into / out of the accumulator registers c
template <int MR>
static inline void gemm_tile_load(f32xv (&c)[MR][GEMM_NV], const float* __restrict__ ct, int64_t ldc) {
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < GEMM_NV; ++v) __builtin_memcpy(&c[r][v], ct + r * ldc + v * GEMM_VW, GEMM_VW * 4);
}

template <int MR>
static inline void gemm_tile_store(float* __restrict__ ct, int64_t ldc, const f32xv (&c)[MR][GEMM_NV]) {
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < GEMM_NV; ++v) __builtin_memcpy(ct + r * ldc + v * GEMM_VW, &c[r][v], GEMM_VW * 4);
}

// one MR x NR tile of C over all K (MR rows, at most GEMM_MR): A's element (r, k) at
// a[r * lda + k * ka], bp = K x NR (k-major), C's element (r, c) at ct[r * ldc + c]; the loops over
// rows and vectors are unrolled, so the accumulators live in registers
template <int MR>
static inline void gemm_micro(int64_t K, const float* __restrict__ a, int64_t lda, int64_t ka,
                              const float* __restrict__ bp, float* __restrict__ ct, int64_t ldc) {
  f32xv c[MR][GEMM_NV];
  gemm_tile_load<MR>(c, ct, ldc);
  for (int64_t k = 0; k < K; ++k) {
    f32xv b[GEMM_NV];
#pragma GCC unroll 4
    for (int v = 0; v < GEMM_NV; ++v) __builtin_memcpy(&b[v], bp + k * GEMM_NR + v * GEMM_VW, GEMM_VW * 4);
    const int64_t o = k * ka;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const f32xv ar = a[r * lda + o] - (f32xv){};  // a broadcast (x - 0 is x, -0 included)
#pragma GCC unroll 4
      for (int v = 0; v < GEMM_NV; ++v) c[r][v] = gemm_fma(ar, b[v], c[r][v]);
    }
  }
  gemm_tile_store<MR>(ct, ldc, c);
}

// C (M x N, element (i, j) at C[i * crs + j * ccs]) += A (a(i, k) at A[i * ars + k * acs]) @
// B (b(k, j) at B[k * brs + j * bcs]); the strides fold T.gemm's transposes and regions in.
template <class T> struct gemm_is_f32 { static constexpr bool value = false; };
template <> struct gemm_is_f32<float> { static constexpr bool value = true; };


// n contiguous elements as float (a loop that vectorizes)
template <class T> static inline void gemm_to_f32(const T* __restrict__ s, float* __restrict__ d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = (float)s[i];
}
#if defined(__F16C__)
// float16 with the F16C instruction (vcvtph2ps, ~0.04 ns a value against 0.37 for half_t's bit
// code: a third of a FlashAttention GEMM's time was this packing); it quiets a signaling NaN where
// half_t keeps the payload as it is, so a group of 8 holding a NaN takes half_t's conversion
template <> inline void gemm_to_f32<half_t>(const half_t* __restrict__ s, float* __restrict__ d, int64_t n) {
  typedef short v8hi __attribute__((vector_size(16)));
  typedef float v8sf __attribute__((vector_size(32)));
  typedef unsigned long long v2du __attribute__((vector_size(16)));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8hi h;
    __builtin_memcpy(&h, s + i, 16);
    const v2du nan = (v2du)((h & (short)0x7fff) > (short)0x7c00);
    if (__builtin_expect((nan[0] | nan[1]) != 0, 0)) {
      for (int j = 0; j < 8; ++j) d[i + j] = half_t::to_float(s[i + j].bits);
    } else {
      const v8sf f = __builtin_ia32_vcvtph2ps256(h);
      __builtin_memcpy(d + i, &f, 32);
    }
  }
  for (; i < n; ++i) d[i] = (float)s[i];
}
#endif

template <class TA, class TB, class TC>
static void gemm_f32acc(int64_t M, int64_t N, int64_t K, const TA* A, int64_t ars, int64_t acs,
                        const TB* B, int64_t brs, int64_t bcs, TC* C, int64_t crs, int64_t ccs) {
  // (generated code calls tc::gemm_bf16 for bf16 x bf16, whose k order differs: tilecraft_cpu_gemm_bf16.h;
  // given two bf16 operands by hand, this one sums in plain k order)
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
        gemm_micro<GEMM_MR>(K, af + ib * GEMM_MR * lda, lda, ka, bp + jb * K * GEMM_NR, (float*)(void*)c0, crs);
        continue;
      }
      for (int r = 0; r < GEMM_MR; ++r)
        for (int c = 0; c < GEMM_NR; ++c)
          ct[r * GEMM_NR + c] = (r < mr && c < nc) ? (float)c0[r * crs + c * ccs] : 0.0f;
      if (GEMM_MR > 4 && mr <= 4)  // a short last tile (a decode's few rows): half the work
        gemm_micro<4>(K, af + ib * GEMM_MR * lda, lda, ka, bp + jb * K * GEMM_NR, ct, GEMM_NR);
      else
        gemm_micro<GEMM_MR>(K, af + ib * GEMM_MR * lda, lda, ka, bp + jb * K * GEMM_NR, ct, GEMM_NR);
      for (int64_t r = 0; r < mr; ++r)
        for (int64_t c = 0; c < nc; ++c) c0[r * crs + c * ccs] = TC(ct[r * GEMM_NR + c]);
    }
  }
}

}  // namespace tc

// tilecraft CPU target: the tile GEMM `C += op(A) @ op(B)` whose A and B are both bfloat16, with
// float32 accumulation (tc::gemm_bf16; codegen/cpp.py emits the call, and includes this header only in
// programs that have such a gemm, so that no other program parses it).  Included after tilecraft_cpu.h.
//
// Semantics (the CPU target's reference; every path below computes exactly this):
//   for each (i, j):  acc = float(C[i, j]);
//                     for p = 0 .. K/2 - 1:  acc = fma(a(i, 2p+1), b(2p+1, j), acc);   // the odd k first,
//                                            acc = fma(a(i, 2p),   b(2p,   j), acc);   // then the even one
//                     if K is odd:           acc = fma(a(i, K-1),  b(K-1,  j), acc);
//                     C[i, j] = TC(acc)
// each step a fused multiply-add rounded to float32 (to nearest even; a bf16 x bf16 product is exact in
// float32, so fused or not is the same bits), C rounded once per call as tilecraft_cpu_gemm.h does.
// This is the order of the AVX512_BF16 instruction vdpbf16ps (Intel SDM: per float32 lane,
// srcdest += a[2i+1] * b[2i+1], then srcdest += a[2i] * b[2i], each an FMA rounded to nearest even), so
// the fast path below can use it.  It differs from the plain k order of the other input types (k, k+1
// swapped in each pair): the language leaves a gemm's summation order open, and the CPU target picks
// this one for bf16 x bf16 (session 22; before it, bf16 ran the plain k order).  The order does not
// depend on the machine or on the data.
//
// Two micro-kernels, same bits:
// - gemm_bf16_fma: the steps above as float32 FMAs (bf16 -> float32 is a 16-bit shift) -- on every
//   machine, and wherever the fast one's conditions fail;
// - gemm_bf16_dp (compiled where the compiler targets AVX512_BF16, __AVX512BF16__): one vdpbf16ps per
//   pair of k.  vdpbf16ps treats denormal inputs as zero and flushes denormal results to zero (DAZ /
//   FTZ, whatever MXCSR says); otherwise it is the two FMAs.  It is used for a tile only when no
//   denormal can enter or arise, so that DAZ / FTZ never act:
//     * every element of A and B (of the whole call) is zero or has 2^-56 <= |x| < 2^56 (finite): every
//       product is then zero or a multiple of 2^-126 of magnitude below 2^112;
//     * every element of the C tile is zero or has 2^-103 <= |c| < inf (a finite float32 of at least
//       2^-103 is a multiple of 2^-126);
//   then every running sum is exactly a multiple of 2^-126 before rounding, and so after it (a sum
//   below 2^-102 in magnitude is exact in float32; above, float32's spacing is a multiple of 2^-126):
//   zero or at least 2^-126, never denormal.  No NaN can arise either (finite products; a sum that
//   overflows to +-inf stays there under both).  Any other tile (denormals, tiny or huge values, inf,
//   NaN) runs gemm_bf16_fma.
// Odd K: the last pair is (a(i, K-1), -0) x (b(K-1, j), +0), whose odd product -0 * +0 = -0 leaves acc
// exactly as it is (x + -0 == x for every x, zeros' signs included), in both micro-kernels: the step
// above, without padding.
//
// tc_gemm_bf16_dot (exported, default 1): 0 runs gemm_bf16_fma for every tile; 2 runs vdpbf16ps for every
// tile without the range checks (not the CPU target's semantics: DAZ / FTZ show).  Tests set it through
// ctypes to compare the paths on the same data (tests/cpu/test_cpu_bf16_gemm.py).  Compiling with
// -DTC_GEMM_BF16_DOT=0 leaves the fast path out (and the variable is then ignored).
#pragma once
#include <cstdint>
#include <cstring>

#ifndef TC_GEMM_BF16_DOT
#define TC_GEMM_BF16_DOT 1
#endif
#if TC_GEMM_BF16_DOT && defined(__AVX512BF16__) && defined(__AVX512F__)
#define TC_GEMM_BF16_DP 1
#endif

extern "C" {
__attribute__((visibility("default"))) int tc_gemm_bf16_dot = 1;
}

namespace tc {

typedef uint32_t gemm_u32xv __attribute__((vector_size(GEMM_VW * 4)));
template <bool B> struct gemm_tail { static constexpr bool value = B; };

static inline uint32_t gemm_ld32(const uint16_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// n bf16 values at p: 1 if any is not zero and outside 2^-56 <= |x| < 2^56 (or is inf / NaN): its
// magnitude bits, exponent in 7..14, lie in [71 << 7, 183 << 7) or are 0 (a loop that vectorizes)
static inline int gemm_bf16_out_of_range(const uint16_t* __restrict__ p, int64_t n) {
  uint16_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t t = p[i] & 0x7fffu;
    bad |= (uint16_t)(t != 0) & (uint16_t)((uint16_t)(t - (71u << 7)) >= (uint16_t)(112u << 7));
  }
  return bad;
}

// the pair word of row r, pair p: a(r, 2p) in the low half, a(r, 2p+1) in the high half; for the last
// pair of an odd K, a(r, K-1) and -0
template <bool TAIL> static inline uint32_t gemm_bf16_aword(const uint16_t* a, int64_t lda, int r, int64_t p, int64_t K) {
  return TAIL ? ((uint32_t)a[r * lda + K - 1] | 0x80000000u) : gemm_ld32(a + r * lda + 2 * p);
}

// d[c] = s[c] | s[ld + c] << 16 for the NR columns c of two rows of B
static inline void gemm_bf16_interleave(const uint16_t* s, int64_t ld, uint32_t* d) {
#if defined(__AVX512BW__)
  if (GEMM_NR == 32) {  // two vpermt2w
    typedef uint16_t v32u16 __attribute__((vector_size(64)));
    v32u16 x, y;
    std::memcpy(&x, s, 64);
    std::memcpy(&y, s + ld, 64);
    const v32u16 lo = __builtin_shufflevector(x, y, 0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                              8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47);
    const v32u16 hi = __builtin_shufflevector(x, y, 16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                              24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63);
    std::memcpy(d, &lo, 64);
    std::memcpy(d + 16, &hi, 64);
    return;
  }
#endif
  for (int c = 0; c < GEMM_NR; ++c) d[c] = (uint32_t)s[c] | (uint32_t)s[ld + c] << 16;
}

// step(p, tail) for every k-pair p of K, an odd K's last k as a pair of its own (gemm_tail<true>)
template <class Step>
static inline void gemm_bf16_pairs(int64_t K, Step&& step) {
  const int64_t kp = K / 2;
  for (int64_t p = 0; p < kp; ++p) step(p, gemm_tail<false>{});
  if (K & 1) step(kp, gemm_tail<true>{});
}

// The exact micro-kernel: one MR x NR tile of C (ct, row stride ldc) += the rows of A at a (row r's
// element k at a[r * lda + k]) times the packed panel bp (pair p: NR words, bp[p * NR + c] =
// b(2p, c) | b(2p+1, c) << 16), as float32 FMAs, the odd k of each pair first.
template <int MR>
static inline void gemm_bf16_fma(int64_t K, const uint16_t* __restrict__ a, int64_t lda,
                                 const uint32_t* __restrict__ bp, float* __restrict__ ct, int64_t ldc) {
  f32xv c[MR][GEMM_NV];
  gemm_tile_load<MR>(c, ct, ldc);
  const gemm_u32xv hi_mask = (gemm_u32xv){} + 0xffff0000u;
  auto step = [&](int64_t p, auto tail) {
    f32xv bh[GEMM_NV], bl[GEMM_NV];
#pragma GCC unroll 4
    for (int v = 0; v < GEMM_NV; ++v) {
      gemm_u32xv w;
      __builtin_memcpy(&w, bp + p * GEMM_NR + v * GEMM_VW, GEMM_VW * 4);
      bh[v] = (f32xv)(w & hi_mask);
      bl[v] = (f32xv)(w << 16);
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const uint32_t w = gemm_bf16_aword<decltype(tail)::value>(a, lda, r, p, K);
      const f32xv ah = (f32xv)((gemm_u32xv){} + (w & 0xffff0000u)), al = (f32xv)((gemm_u32xv){} + (w << 16));
#pragma GCC unroll 4
      for (int v = 0; v < GEMM_NV; ++v) c[r][v] = gemm_fma(ah, bh[v], c[r][v]);
#pragma GCC unroll 4
      for (int v = 0; v < GEMM_NV; ++v) c[r][v] = gemm_fma(al, bl[v], c[r][v]);
    }
  };
  gemm_bf16_pairs(K, step);
  gemm_tile_store<MR>(ct, ldc, c);
}

#if defined(TC_GEMM_BF16_DP)
// c + the two products of each lane's bf16 pair (odd first), one vdpbf16ps (inline assembly: GCC 12
// and 13 give its builtin different vector types)
static inline f32xv gemm_dpbf16(f32xv c, gemm_u32xv a, gemm_u32xv b) {
  __asm__("vdpbf16ps %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
  return c;
}

// the fast micro-kernel: gemm_bf16_fma's tile by vdpbf16ps, for tiles that meet the header's conditions
// (false: the C tile is out of range, nothing was done).  C's range, on the loaded accumulators: every
// magnitude's bits t = |c| are 0 or in [24 << 23, 255 << 23): min(t - 1) >= (24 << 23) - 1 (a zero wraps
// to the top) and max(t) < 255 << 23, unsigned, two vector folds a register
// (next: the C tile the caller takes next, row stride ldc, fetched into L1 during this one's loop)
template <int MR>
static inline bool gemm_bf16_dp(bool check, int64_t K, const uint16_t* __restrict__ a, int64_t lda,
                                const uint32_t* __restrict__ bp, float* __restrict__ ct, int64_t ldc,
                                const float* next) {
  f32xv c[MR][GEMM_NV];
  gemm_tile_load<MR>(c, ct, ldc);
  {
    const gemm_u32xv mag = (gemm_u32xv){} + 0x7fffffffu, one = (gemm_u32xv){} + 1u;
    gemm_u32xv lo = (gemm_u32xv){} + 0xffffffffu, hi = (gemm_u32xv){};
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < GEMM_NV; ++v) {
        const gemm_u32xv t = (gemm_u32xv)c[r][v] & mag, t1 = t - one;
        lo = t1 < lo ? t1 : lo;
        hi = t > hi ? t : hi;
      }
    uint32_t l = lo[0], h = hi[0];
#pragma GCC unroll 16
    for (int i = 1; i < GEMM_VW; ++i) {
      l = lo[i] < l ? lo[i] : l;
      h = hi[i] > h ? hi[i] : h;
    }
    if (check && (l < (24u << 23) - 1u || h >= (255u << 23))) return false;
  }
  if (next != nullptr)
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < GEMM_NR * 4; v += 64) __builtin_prefetch(next + r * ldc + v / 4, 1, 3);
  auto step = [&](int64_t p, auto tail) {
    gemm_u32xv b[GEMM_NV];
#pragma GCC unroll 4
    for (int v = 0; v < GEMM_NV; ++v) __builtin_memcpy(&b[v], bp + p * GEMM_NR + v * GEMM_VW, GEMM_VW * 4);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const gemm_u32xv av = (gemm_u32xv){} + gemm_bf16_aword<decltype(tail)::value>(a, lda, r, p, K);
#pragma GCC unroll 4
      for (int v = 0; v < GEMM_NV; ++v) c[r][v] = gemm_dpbf16(c[r][v], av, b[v]);
    }
  };
  gemm_bf16_pairs(K, step);
  gemm_tile_store<MR>(ct, ldc, c);
  return true;
}
#endif

// fast: 0 the FMA path, 1 vdpbf16ps if the C tile is in range, 2 vdpbf16ps (tc_gemm_bf16_dot = 2)
template <int MR>
static inline void gemm_bf16_tile(int fast, int64_t K, const uint16_t* a, int64_t lda, const uint32_t* bp,
                                  float* ct, int64_t ldc, const float* next = nullptr) {
#if defined(TC_GEMM_BF16_DP)
  if (fast && gemm_bf16_dp<MR>(fast == 1, K, a, lda, bp, ct, ldc, next)) return;
#endif
  (void)fast;
  (void)next;
  gemm_bf16_fma<MR>(K, a, lda, bp, ct, ldc);
}

// C (M x N, element (i, j) at C[i * crs + j * ccs]) += A (a(i, k) at A[i * ars + k * acs]) @
// B (b(k, j) at B[k * brs + j * bcs]), A and B bfloat16: the semantics at the top of this header
template <class TC>
static void gemm_bf16(int64_t M, int64_t N, int64_t K, const bfloat16_t* A_, int64_t ars, int64_t acs,
                      const bfloat16_t* B_, int64_t brs, int64_t bcs, TC* C, int64_t crs, int64_t ccs) {
  const uint16_t* A = (const uint16_t*)(const void*)A_;
  const uint16_t* B = (const uint16_t*)(const void*)B_;
  const int64_t mb = (M + GEMM_MR - 1) / GEMM_MR, nb = (N + GEMM_NR - 1) / GEMM_NR, KP = (K + 1) / 2;
  int bad = 0;
  // A: row i's element k at a[i * lda + k] -- in place when its rows are contiguous and M fills whole
  // micro-tiles, else a row-major copy with zero rows past M
  const uint16_t* a;
  int64_t lda;
  if (acs == 1 && M % GEMM_MR == 0) {
    a = A; lda = ars;
  } else {
    uint16_t* __restrict__ t = (uint16_t*)(void*)gemm_scratch(0).get((mb * GEMM_MR * K + 1) / 2 + 1);
    for (int64_t i = 0; i < M; ++i) {
      if (acs == 1) std::memcpy(t + i * K, A + i * ars, (size_t)K * 2);
      else for (int64_t k = 0; k < K; ++k) t[i * K + k] = A[i * ars + k * acs];
    }
    std::memset(t + M * K, 0, (size_t)((mb * GEMM_MR - M) * K) * 2);
    a = t; lda = K;
  }
  // B packed: panel jb, pair p: NR words b(2p, j) | b(2p+1, j) << 16 for j = jb*NR + c, zero past N;
  // an odd K's last pair holds b(K-1, j) | +0
  uint32_t* __restrict__ bp = (uint32_t*)(void*)gemm_scratch(1).get(nb * KP * GEMM_NR);
  const int64_t kf = K / 2;  // whole pairs
  for (int64_t jb = 0; jb < nb; ++jb) {
    const int64_t j0 = jb * GEMM_NR, nc = N - j0 < GEMM_NR ? N - j0 : GEMM_NR;
    uint32_t* __restrict__ d = bp + jb * KP * GEMM_NR;
    if (bcs == 1 && nc == GEMM_NR) {  // rows of B contiguous: interleave two rows
      for (int64_t p = 0; p < kf; ++p) gemm_bf16_interleave(B + 2 * p * brs + j0, brs, d + p * GEMM_NR);
      if (K & 1)
        for (int c = 0; c < GEMM_NR; ++c) d[kf * GEMM_NR + c] = B[(K - 1) * brs + j0 + c];
    } else if (brs == 1) {  // columns of B contiguous (a transposed B): each pair is one word
      for (int c = 0; c < GEMM_NR; ++c) {
        if (c >= nc) {
          for (int64_t p = 0; p < KP; ++p) d[p * GEMM_NR + c] = 0;
          continue;
        }
        const uint16_t* s = B + (j0 + c) * bcs;
        for (int64_t p = 0; p < kf; ++p) d[p * GEMM_NR + c] = gemm_ld32(s + 2 * p);
        if (K & 1) d[kf * GEMM_NR + c] = s[K - 1];
      }
    } else {
      for (int64_t p = 0; p < KP; ++p)
        for (int c = 0; c < GEMM_NR; ++c) {
          const int64_t j = j0 + c, k = 2 * p;
          const uint32_t lo = c < nc ? B[k * brs + j * bcs] : 0;
          const uint32_t hi = c < nc && k + 1 < K ? B[(k + 1) * brs + j * bcs] : 0;
          d[p * GEMM_NR + c] = lo | hi << 16;
        }
    }
  }
  int fast = 0;
#if defined(TC_GEMM_BF16_DP)
  if (tc_gemm_bf16_dot == 1) {
    // every input in range (the packed B holds B's values and zeros; A's rows as read)
    bad = gemm_bf16_out_of_range((const uint16_t*)(const void*)bp, nb * KP * GEMM_NR * 2);
    if (lda == K) bad = bad || gemm_bf16_out_of_range(a, M * K);  // rows back to back: one run
    else for (int64_t i = 0; i < M && !bad; ++i) bad = gemm_bf16_out_of_range(a + i * lda, K);
    fast = !bad;
  } else if (tc_gemm_bf16_dot == 2) {
    fast = 2;
  }
#endif
  (void)bad;
  alignas(64) float ct[GEMM_MR * GEMM_NR];
  for (int64_t jb = 0; jb < nb; ++jb) {
    const int64_t nc = N - jb * GEMM_NR < GEMM_NR ? N - jb * GEMM_NR : GEMM_NR;
    const uint32_t* panel = bp + jb * KP * GEMM_NR;
    for (int64_t ib = 0; ib < mb; ++ib) {
      const int64_t mr = M - ib * GEMM_MR < GEMM_MR ? M - ib * GEMM_MR : GEMM_MR;
      const uint16_t* ai = a + ib * GEMM_MR * lda;
      TC* c0 = C + ib * GEMM_MR * crs + jb * GEMM_NR * ccs;
      if (gemm_is_f32<TC>::value && ccs == 1 && mr == GEMM_MR && nc == GEMM_NR) {  // a whole float32 tile in place
        const TC* next = ib + 1 < mb ? c0 + GEMM_MR * crs : jb + 1 < nb ? C + (jb + 1) * GEMM_NR : nullptr;
        gemm_bf16_tile<GEMM_MR>(fast, K, ai, lda, panel, (float*)(void*)c0, crs, (const float*)(const void*)next);
        continue;
      }
      for (int r = 0; r < GEMM_MR; ++r)
        for (int c = 0; c < GEMM_NR; ++c)
          ct[r * GEMM_NR + c] = (r < mr && c < nc) ? (float)c0[r * crs + c * ccs] : 0.0f;
      if (GEMM_MR > 4 && mr <= 4)  // a short last tile (a decode's few rows): half the work
        gemm_bf16_tile<4>(fast, K, ai, lda, panel, ct, GEMM_NR);
      else
        gemm_bf16_tile<GEMM_MR>(fast, K, ai, lda, panel, ct, GEMM_NR);
      for (int64_t r = 0; r < mr; ++r)
        for (int64_t c = 0; c < nc; ++c) c0[r * crs + c * ccs] = TC(ct[r * GEMM_NR + c]);
    }
  }
}

}  // namespace tc

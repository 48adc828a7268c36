// tilecraft CPU target: the tile GEMM `C += op(A) @ op(B)` whose A and B are both bfloat16, with
// float32 accumulation (tc::gemm_bf16; codegen/cpp.py emits the call, and includes this header only in
// programs that have such a gemm, so that no other program parses it).  Included after tilecraft_cpu.h.
//
// Semantics (the CPU target's reference; every path below computes exactly this):
//   for each (i, j):  acc = float(C[i, j]);
//                     for each block of 32 k (k0 = 0, 32, 64, ...; the last one may be shorter):
//                       e = +0;  o = +0;
//                       for k = k0, k0 + 2, ... (< min(k0 + 32, K)):  e = fma(a(i, k), b(k, j), e);
//                       for k = k0 + 1, k0 + 3, ...:                  o = fma(a(i, k), b(k, j), o);
//                       acc = acc + (e + o);
//                     C[i, j] = TC(acc)
// each step rounded to float32 (to nearest even; a bf16 x bf16 product is exact in float32, so fused or
// not is the same bits), C rounded once per call as tilecraft_cpu_gemm.h does.  Per block this is the
// formula of AMX's TDPBF16PS on a 16 x 32 A tile (the even and the odd products summed in two chains
// started at zero, then their sum added to C: the SDM's pseudo-code, and this machine's instruction bit
// for bit, session 31).  The language leaves a gemm's summation order open; the CPU target picks this
// one for bf16 x bf16 (session 31; sessions 22-30 took vdpbf16ps's order, one chain, k in pairs odd
// first; before that plain k order), because every path below can compute it at its full speed.  The
// order does not depend on the machine or on the data.
//
// Three micro-kernels, same bits:
// - gemm_bf16_fma: the chains as float32 FMAs (bf16 -> float32 is a 16-bit shift) -- on every machine,
//   and wherever the fast paths' conditions fail;
// - gemm_bf16_dp (compiled where the compiler targets AVX512_BF16, __AVX512BF16__): vdpbf16ps, which
//   adds to each float32 lane the product of its pair's high halves, then that of the low halves, each
//   an FMA rounded to nearest even.  Fed the words (lo = a(k+2), hi = a(k)) it steps the even chain by
//   two (k, then k+2), fed (a(k+3), a(k+1)) the odd one: A and B are packed so, four k a group.
// - gemm_bf16_amx (compiled where the compiler targets AMX-BF16 and the kernel grants the process the
//   tile state, arch_prctl): one TDPBF16PS per 16 x 16 C tile and block of 32 k, started from a zeroed
//   tile, stored, and added to C in float32 vectors.
// vdpbf16ps and TDPBF16PS treat denormal inputs as zero and flush denormal results (DAZ / FTZ, whatever
// MXCSR says); otherwise they are the FMAs above.  They are used for a call only when every element of
// A and B is zero or has 2^-56 <= |x| < 2^56 (finite): every product is then zero or a multiple of
// 2^-126 of magnitude below 2^112, so every running sum of a chain, and e + o, is exactly a multiple of
// 2^-126 before rounding and after it (float32's spacing above 2^-102 is a multiple of 2^-126; below,
// such a sum is exact): zero or at least 2^-126, never denormal, so DAZ / FTZ never act.  C itself never
// enters them (acc + (e + o) is a float32 vector add), and no NaN can arise from finite inputs (a chain
// that overflows to +-inf stays there under all three).  Any other call (denormals, tiny or huge values,
// inf, NaN in A or B) runs gemm_bf16_fma.
// Padding: a k past K is a zero in both A and B (product +0): a chain starts at +0, and x + (+0) is x
// for every x but -0, which a chain started at +0 never holds -- padding changes no bit.
//
// tc_gemm_bf16_dot (exported, default 1): 0 runs gemm_bf16_fma for every call; 2 runs the fast path
// without the range checks (not the CPU target's semantics: DAZ / FTZ show).  tc_gemm_bf16_amx (exported,
// default 1): 0 keeps AMX out (vdpbf16ps, or the FMAs).  tc_gemm_bf16_calls counts the calls each path
// ran.  Tests set them through ctypes to compare the
// paths on the same data (tests/cpu/test_cpu_bf16_gemm.py).  Compiling with -DTC_GEMM_BF16_DOT=0 leaves
// both fast paths out (the variables are then ignored).
#pragma once
#include <cstdint>
#include <cstring>

#ifndef TC_GEMM_BF16_DOT
#define TC_GEMM_BF16_DOT 1
#endif
#if TC_GEMM_BF16_DOT && defined(__AVX512BF16__) && defined(__AVX512F__)
#define TC_GEMM_BF16_DP 1
#endif
#if TC_GEMM_BF16_DOT && defined(__AMX_BF16__) && defined(__AMX_TILE__) && defined(__AVX512F__) && defined(__x86_64__)
#define TC_GEMM_BF16_AMX 1
#endif

extern "C" {
__attribute__((visibility("default"))) int tc_gemm_bf16_dot = 1;
__attribute__((visibility("default"))) int tc_gemm_bf16_amx = 1;
// calls by the path they took: [0] the FMAs, [1] vdpbf16ps, [2] AMX (tests read it: which path ran)
__attribute__((visibility("default"))) long long tc_gemm_bf16_calls[3] = {0, 0, 0};
}

namespace tc {

typedef uint32_t gemm_u32xv __attribute__((vector_size(GEMM_VW * 4)));
template <bool B> struct gemm_tail { static constexpr bool value = B; };
// rows of the FMA and vdpbf16ps tiles: two chains and C, 3 x 4 x GEMM_NV accumulators
constexpr int GEMM_BF16_MR = 4;
constexpr int GEMM_BF16_KB = 32;  // k a block (the formula's, and one TDPBF16PS's)

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

// the same over a rows x cols matrix, element (r, c) at p[r * rs + c * cs]
static inline int gemm_bf16_matrix_out_of_range(const uint16_t* p, int64_t rows, int64_t cols, int64_t rs,
                                                int64_t cs) {
  if (cs == 1 && rs == cols) return gemm_bf16_out_of_range(p, rows * cols);
  if (cs == 1) {
    for (int64_t r = 0; r < rows; ++r) if (gemm_bf16_out_of_range(p + r * rs, cols)) return 1;
    return 0;
  }
  if (rs == 1) return gemm_bf16_matrix_out_of_range(p, cols, rows, cs, 1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) if (gemm_bf16_out_of_range(p + r * rs + c * cs, 1)) return 1;
  return 0;
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

// c += e + o, vector by vector (the formula's last step of a block)
template <int MR>
static inline void gemm_bf16_fold(f32xv (&c)[MR][GEMM_NV], const f32xv (&e)[MR][GEMM_NV],
                                  const f32xv (&o)[MR][GEMM_NV]) {
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < GEMM_NV; ++v) c[r][v] = c[r][v] + (e[r][v] + o[r][v]);
}

// The exact micro-kernel: one MR x NR tile of C (ct, row stride ldc) += the rows of A at a (row r's
// element k at a[r * lda + k]) times the packed panel bp (pair p: NR words, bp[p * NR + c] =
// b(2p, c) | b(2p+1, c) << 16), as float32 FMAs in the two chains of each block of 32 k.
template <int MR>
static inline void gemm_bf16_fma(int64_t K, const uint16_t* __restrict__ a, int64_t lda,
                                 const uint32_t* __restrict__ bp, float* __restrict__ ct, int64_t ldc) {
  f32xv c[MR][GEMM_NV];
  gemm_tile_load<MR>(c, ct, ldc);
  const gemm_u32xv hi_mask = (gemm_u32xv){} + 0xffff0000u;
  const int64_t kp = (K + 1) / 2, kf = K / 2;
  for (int64_t p0 = 0; p0 < kp; p0 += GEMM_BF16_KB / 2) {
    f32xv e[MR][GEMM_NV] = {}, o[MR][GEMM_NV] = {};
    auto step = [&](int64_t p, auto tail) {
      f32xv bo[GEMM_NV], be[GEMM_NV];
#pragma GCC unroll 4
      for (int v = 0; v < GEMM_NV; ++v) {
        gemm_u32xv w;
        __builtin_memcpy(&w, bp + p * GEMM_NR + v * GEMM_VW, GEMM_VW * 4);
        bo[v] = (f32xv)(w & hi_mask);
        be[v] = (f32xv)(w << 16);
      }
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const uint32_t w = gemm_bf16_aword<decltype(tail)::value>(a, lda, r, p, K);
        const f32xv ao = (f32xv)((gemm_u32xv){} + (w & 0xffff0000u)), ae = (f32xv)((gemm_u32xv){} + (w << 16));
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; ++v) e[r][v] = gemm_fma(ae, be[v], e[r][v]);
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; ++v) o[r][v] = gemm_fma(ao, bo[v], o[r][v]);
      }
    };
    const int64_t p1 = p0 + GEMM_BF16_KB / 2 < kf ? p0 + GEMM_BF16_KB / 2 : kf;
    for (int64_t p = p0; p < p1; ++p) step(p, gemm_tail<false>{});
    if ((K & 1) && kf >= p0 && kf < p0 + GEMM_BF16_KB / 2) step(kf, gemm_tail<true>{});
    gemm_bf16_fold<MR>(c, e, o);
  }
  gemm_tile_store<MR>(ct, ldc, c);
}

#if defined(TC_GEMM_BF16_DP)
// c + the two products of each lane's bf16 pair (high halves first), one vdpbf16ps (inline assembly: GCC
// 12 and 13 give its builtin different vector types)
static inline f32xv gemm_dpbf16(f32xv c, gemm_u32xv a, gemm_u32xv b) {
  __asm__("vdpbf16ps %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
  return c;
}

// (lo = x(k+2), hi = x(k)) and (lo = x(k+3), hi = x(k+1)) of four bf16 values x(k .. k+3), as one
// 64-bit word (the even chain's word low)
static inline uint64_t gemm_bf16_quad(uint64_t x) {
  const uint64_t e = (x >> 32 & 0xffffu) | (x & 0xffffu) << 16, o = (x >> 48) | (x >> 16 & 0xffffu) << 16;
  return e | o << 32;
}

// the vdpbf16ps micro-kernel, for calls that meet the header's conditions: A packed in quads (row r,
// group g of four k: words a[r * ldw + 2g] (even chain), a[r * ldw + 2g + 1] (odd chain)), the panel
// likewise (group g: NR words of the even chain at bq[2g * NR], then NR of the odd one); G groups, a
// multiple of 8 (whole blocks, zeros past K)
template <int MR>
static inline void gemm_bf16_dp(int64_t G, const uint32_t* __restrict__ a, int64_t ldw,
                                const uint32_t* __restrict__ bq, float* __restrict__ ct, int64_t ldc) {
  f32xv c[MR][GEMM_NV];
  gemm_tile_load<MR>(c, ct, ldc);
  for (int64_t g0 = 0; g0 < G; g0 += GEMM_BF16_KB / 4) {
    f32xv e[MR][GEMM_NV] = {}, o[MR][GEMM_NV] = {};
    for (int64_t g = g0; g < g0 + GEMM_BF16_KB / 4; ++g) {
      gemm_u32xv be[GEMM_NV], bo[GEMM_NV];
#pragma GCC unroll 4
      for (int v = 0; v < GEMM_NV; ++v) {
        __builtin_memcpy(&be[v], bq + 2 * g * GEMM_NR + v * GEMM_VW, GEMM_VW * 4);
        __builtin_memcpy(&bo[v], bq + (2 * g + 1) * GEMM_NR + v * GEMM_VW, GEMM_VW * 4);
      }
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const gemm_u32xv ae = (gemm_u32xv){} + a[r * ldw + 2 * g], ao = (gemm_u32xv){} + a[r * ldw + 2 * g + 1];
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; ++v) e[r][v] = gemm_dpbf16(e[r][v], ae, be[v]);
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; ++v) o[r][v] = gemm_dpbf16(o[r][v], ao, bo[v]);
      }
    }
    gemm_bf16_fold<MR>(c, e, o);
  }
  gemm_tile_store<MR>(ct, ldc, c);
}
#endif

#if defined(TC_GEMM_BF16_AMX)
// the tile state for this process (Linux grants it on request: arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA), a raw system call so that no C header is parsed); false: AMX stays unused
static inline bool gemm_amx_granted() {
  static const bool ok = [] {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "0"(158L), "D"(0x1023L), "S"(18L) : "rcx", "r11", "memory");
    return r == 0;
  }();
  return ok;
}

// eight 16-row x 64-byte tiles: tmm0-3 the 32 x 32 C block's quarters, tmm4-5 A's two 16-row halves,
// tmm6-7 B's two 16-column halves
static inline void gemm_amx_configure() {
  alignas(64) uint8_t cfg[64] = {};
  cfg[0] = 1;
  for (int t = 0; t < 8; ++t) {
    cfg[16 + 2 * t] = 64;
    cfg[48 + t] = 16;
  }
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg) : "memory");
}

// 1 if every element of the 32 x 32 float32 tile at ct (row stride ldc) is zero or has 2^-103 <= |c| < inf:
// the magnitude's bits t are 0 or in [24 << 23, 255 << 23), i.e. t - 1 (a zero wraps to the top) is at
// least (24 << 23) - 1 and t is below 255 << 23, unsigned
static inline bool gemm_amx_c_in_range(const float* ct, int64_t ldc) {
  const gemm_u32xv mag = (gemm_u32xv){} + 0x7fffffffu, one = (gemm_u32xv){} + 1u;
  gemm_u32xv lo = (gemm_u32xv){} + 0xffffffffu, hi = (gemm_u32xv){};
  for (int r = 0; r < 32; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < GEMM_NV; ++v) {
      gemm_u32xv t;
      __builtin_memcpy(&t, ct + r * ldc + v * GEMM_VW, GEMM_VW * 4);
      t &= mag;
      const gemm_u32xv t1 = t - one;
      lo = t1 < lo ? t1 : lo;
      hi = t > hi ? t : hi;
    }
  uint32_t l = lo[0], h = hi[0];
  for (int i = 1; i < GEMM_VW; ++i) {
    l = lo[i] < l ? lo[i] : l;
    h = hi[i] > h ? hi[i] : h;
  }
  return l >= (24u << 23) - 1u && h < (255u << 23);
}

// one 32 x 32 C tile (ct, row stride ldc) += 32 rows of A at a (element k of row r at a[r * lda + k],
// whole blocks of 32 k, zeros past K) times the 32-column panel bp (natural pair words, KP2 pairs, a
// multiple of 16), one TDPBF16PS per 16 x 16 quarter and block.  With C in range (gemm_amx_c_in_range) C
// itself is the tiles' start: every running sum is then a multiple of 2^-126 (zero or at least 2^-126),
// so DAZ / FTZ never act and dst + (e + o) is the formula's step.  Else each block's product starts
// from zeroed tiles and is added to C in float32 vectors.
static inline void gemm_bf16_amx(int64_t KP2, const uint16_t* a, int64_t lda, const uint32_t* bp,
                                 float* __restrict__ ct, int64_t ldc) {
  const int64_t sa = lda * 2, sb = GEMM_NR * 4;

#define TC_AMX_BLOCK                                                                                    \
  "tileloadd (%0,%4,1), %%tmm4\n\ttileloadd (%1,%4,1), %%tmm5\n\t"                                       \
  "tileloadd (%2,%5,1), %%tmm6\n\ttileloadd (%3,%5,1), %%tmm7\n\t"                                       \
  "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\ttdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"                             \
  "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\ttdpbf16ps %%tmm7, %%tmm5, %%tmm3\n\t"
  if (gemm_amx_c_in_range(ct, ldc)) {
    const int64_t sc = ldc * 4;
    float *c0 = ct, *c1 = ct + 16, *c2 = ct + 16 * ldc, *c3 = ct + 16 * ldc + 16;
    __asm__ volatile("tileloadd (%0,%4,1), %%tmm0\n\ttileloadd (%1,%4,1), %%tmm1\n\t"
                     "tileloadd (%2,%4,1), %%tmm2\n\ttileloadd (%3,%4,1), %%tmm3"
                     : : "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(sc) : "memory");
    for (int64_t p0 = 0; p0 < KP2; p0 += 16) {
      const uint16_t* a0 = a + 2 * p0;
      const uint32_t* b0 = bp + p0 * GEMM_NR;
      __asm__ volatile(TC_AMX_BLOCK : : "r"(a0), "r"(a0 + 16 * lda), "r"(b0), "r"(b0 + 16), "r"(sa), "r"(sb)
                       : "memory");
    }
    __asm__ volatile("tilestored %%tmm0, (%0,%4,1)\n\ttilestored %%tmm1, (%1,%4,1)\n\t"
                     "tilestored %%tmm2, (%2,%4,1)\n\ttilestored %%tmm3, (%3,%4,1)"
                     : : "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(sc) : "memory");
    return;
  }
  alignas(64) float d[32 * 32];
  const int64_t sd = 32 * 4;
  for (int64_t p0 = 0; p0 < KP2; p0 += 16) {
    const uint16_t* a0 = a + 2 * p0;
    const uint32_t* b0 = bp + p0 * GEMM_NR;
    __asm__ volatile(
        "tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3\n\t" TC_AMX_BLOCK
        "tilestored %%tmm0, (%6,%7,1)\n\ttilestored %%tmm1, (%8,%7,1)\n\t"
        "tilestored %%tmm2, (%9,%7,1)\n\ttilestored %%tmm3, (%10,%7,1)"
        :
        : "r"(a0), "r"(a0 + 16 * lda), "r"(b0), "r"(b0 + 16), "r"(sa), "r"(sb), "r"(d), "r"(sd), "r"(d + 16),
          "r"(d + 16 * 32), "r"(d + 16 * 32 + 16)
        : "memory");
#pragma GCC unroll 4
    for (int r = 0; r < 32; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < GEMM_NV; ++v) {
        f32xv x, y;
        __builtin_memcpy(&x, ct + r * ldc + v * GEMM_VW, GEMM_VW * 4);
        __builtin_memcpy(&y, d + r * 32 + v * GEMM_VW, GEMM_VW * 4);
        x = x + y;
        __builtin_memcpy(ct + r * ldc + v * GEMM_VW, &x, GEMM_VW * 4);
      }
  }
#undef TC_AMX_BLOCK
}
#endif

// The tiles of C: kern(ib, jb, tile, ldc) on each MR x NR tile -- in place where C is float32 with
// contiguous rows and the tile is whole, else through a float32 copy (zeros past M and N).  Order: the
// 4-row tiles down each column panel (the panel's packed B stays in L1); the AMX kernel's 32-row tiles
// along each row stripe (C read in whole rows: 10 % faster than down the panels, 512^3 / 1024^3, session
// 31; a software prefetch of the next tile's C was 10 % slower)
template <int MR, class TC, class Kern>
static inline void gemm_bf16_tiles(int64_t M, int64_t N, TC* C, int64_t crs, int64_t ccs, Kern&& kern) {
  const int64_t mb = (M + MR - 1) / MR, nb = (N + GEMM_NR - 1) / GEMM_NR;
  alignas(64) float ct[MR * GEMM_NR];
  for (int64_t it = 0; it < nb * mb; ++it) {
    const int64_t jb = MR == 32 ? it % nb : it / mb, ib = MR == 32 ? it / nb : it % mb;
    const int64_t nc = N - jb * GEMM_NR < GEMM_NR ? N - jb * GEMM_NR : GEMM_NR;
    {
      const int64_t mr = M - ib * MR < MR ? M - ib * MR : MR;
      TC* c0 = C + ib * MR * crs + jb * GEMM_NR * ccs;
      if (gemm_is_f32<TC>::value && ccs == 1 && mr == MR && nc == GEMM_NR) {
        kern(ib, jb, (float*)(void*)c0, crs);
        continue;
      }
      for (int r = 0; r < MR; ++r)
        for (int c = 0; c < GEMM_NR; ++c)
          ct[r * GEMM_NR + c] = (r < mr && c < nc) ? (float)c0[r * crs + c * ccs] : 0.0f;
      kern(ib, jb, ct, (int64_t)GEMM_NR);
      for (int64_t r = 0; r < mr; ++r)
        for (int64_t c = 0; c < nc; ++c) c0[r * crs + c * ccs] = TC(ct[r * GEMM_NR + c]);
    }
  }
}

// A's rows for the FMA and AMX kernels: row i's element k at a[i * lda + k] -- in place when its rows are
// contiguous, M fills whole MR-row tiles and K whole kb-blocks, else a row-major copy (row stride K
// rounded up to kb, zeros past M and K)
static inline const uint16_t* gemm_bf16_rows(const uint16_t* A, int64_t M, int64_t K, int64_t ars, int64_t acs,
                                             int64_t MR, int64_t kb, int64_t& lda) {
  if (acs == 1 && M % MR == 0 && K % kb == 0) {
    lda = ars;
    return A;
  }
  const int64_t mp = (M + MR - 1) / MR * MR, kp = (K + kb - 1) / kb * kb;
  uint16_t* __restrict__ t = (uint16_t*)(void*)gemm_scratch(0).get((mp * kp + 1) / 2 + 1);
  for (int64_t i = 0; i < M; ++i) {
    if (acs == 1) std::memcpy(t + i * kp, A + i * ars, (size_t)K * 2);
    else for (int64_t k = 0; k < K; ++k) t[i * kp + k] = A[i * ars + k * acs];
    std::memset(t + i * kp + K, 0, (size_t)(kp - K) * 2);
  }
  std::memset(t + M * kp, 0, (size_t)((mp - M) * kp) * 2);
  lda = kp;
  return t;
}

// B packed in natural pairs: panel jb, pair p: NR words b(2p, j) | b(2p+1, j) << 16 for j = jb*NR + c,
// zero past N; an odd K's last pair holds b(K-1, j) | +0; KP2 >= (K+1)/2 pairs a panel (zeros past K)
static inline const uint32_t* gemm_bf16_pack_pairs(const uint16_t* B, int64_t N, int64_t K, int64_t brs,
                                                   int64_t bcs, int64_t KP2) {
  const int64_t nb = (N + GEMM_NR - 1) / GEMM_NR, kf = K / 2, KP = (K + 1) / 2;
  uint32_t* __restrict__ bp = (uint32_t*)(void*)gemm_scratch(1).get(nb * KP2 * GEMM_NR);
  for (int64_t jb = 0; jb < nb; ++jb) {
    const int64_t j0 = jb * GEMM_NR, nc = N - j0 < GEMM_NR ? N - j0 : GEMM_NR;
    uint32_t* __restrict__ d = bp + jb * KP2 * GEMM_NR;
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
    std::memset(d + KP * GEMM_NR, 0, (size_t)((KP2 - KP) * GEMM_NR) * 4);
  }
  return bp;
}

#if defined(TC_GEMM_BF16_DP)
// x(k) for k = 4g .. 4g+3 of a row or column (element k at s[k * ks]) as one 64-bit word, zeros past K
static inline uint64_t gemm_bf16_load_quad(const uint16_t* s, int64_t ks, int64_t g, int64_t K) {
  const int64_t k = 4 * g;
  if (ks == 1 && k + 4 <= K) {
    uint64_t x;
    std::memcpy(&x, s + k, 8);
    return x;
  }
  uint64_t x = 0;
  for (int q = 0; q < 4; ++q)
    if (k + q < K) x |= (uint64_t)s[(k + q) * ks] << (16 * q);
  return x;
}
#endif

// C (M x N, element (i, j) at C[i * crs + j * ccs]) += A (a(i, k) at A[i * ars + k * acs]) @
// B (b(k, j) at B[k * brs + j * bcs]), A and B bfloat16: the semantics at the top of this header
template <class TC>
static void gemm_bf16(int64_t M, int64_t N, int64_t K, const bfloat16_t* A_, int64_t ars, int64_t acs,
                      const bfloat16_t* B_, int64_t brs, int64_t bcs, TC* C, int64_t crs, int64_t ccs) {
  const uint16_t* A = (const uint16_t*)(const void*)A_;
  const uint16_t* B = (const uint16_t*)(const void*)B_;
  constexpr int MR = GEMM_BF16_MR;
  // 0 the FMAs, 1 vdpbf16ps, 2 AMX
  int path = 0;
#if defined(TC_GEMM_BF16_DP) || defined(TC_GEMM_BF16_AMX)
  if (tc_gemm_bf16_dot == 2 ||
      (tc_gemm_bf16_dot == 1 && !gemm_bf16_matrix_out_of_range(A, M, K, ars, acs) &&
       !gemm_bf16_matrix_out_of_range(B, K, N, brs, bcs))) {
#if defined(TC_GEMM_BF16_DP)
    path = 1;
#endif
#if defined(TC_GEMM_BF16_AMX)
    if (GEMM_NR == 32 && tc_gemm_bf16_amx && gemm_amx_granted()) path = 2;
#endif
  }
#endif
  __atomic_fetch_add(&tc_gemm_bf16_calls[path], 1, __ATOMIC_RELAXED);
#if defined(TC_GEMM_BF16_AMX)
  if (path == 2 && GEMM_NR == 32) {
    int64_t lda;
    const uint16_t* a = gemm_bf16_rows(A, M, K, ars, acs, 32, GEMM_BF16_KB, lda);
    const int64_t KP2 = (K + GEMM_BF16_KB - 1) / GEMM_BF16_KB * (GEMM_BF16_KB / 2);
    const uint32_t* bp = gemm_bf16_pack_pairs(B, N, K, brs, bcs, KP2);
    gemm_amx_configure();
    gemm_bf16_tiles<32>(M, N, C, crs, ccs, [&](int64_t ib, int64_t jb, float* ct, int64_t ldc) {
      gemm_bf16_amx(KP2, a + ib * 32 * lda, lda, bp + jb * KP2 * GEMM_NR, ct, ldc);
    });
    __asm__ volatile("tilerelease" ::: "memory");
    return;
  }
#endif
#if defined(TC_GEMM_BF16_DP)
  if (path == 1) {
    const int64_t G = (K + GEMM_BF16_KB - 1) / GEMM_BF16_KB * (GEMM_BF16_KB / 4);
    const int64_t mb = (M + MR - 1) / MR, nb = (N + GEMM_NR - 1) / GEMM_NR;
    // A in quads: row i, group g at a[i * 2G + 2g] (even chain), + 1 (odd chain); zero rows past M
    uint64_t* __restrict__ aq = (uint64_t*)(void*)gemm_scratch(0).get(mb * MR * G * 2);
    for (int64_t i = 0; i < mb * MR; ++i)
      for (int64_t g = 0; g < G; ++g)
        aq[i * G + g] = i < M ? gemm_bf16_quad(gemm_bf16_load_quad(A + i * ars, acs, g, K)) : 0;
    // B in quads: panel jb, group g: NR words of the even chain, then NR of the odd one; zeros past N
    uint32_t* __restrict__ bq = (uint32_t*)(void*)gemm_scratch(1).get(nb * G * 2 * GEMM_NR);
    for (int64_t jb = 0; jb < nb; ++jb) {
      uint32_t* __restrict__ d = bq + jb * G * 2 * GEMM_NR;
      const int64_t j0 = jb * GEMM_NR, nc = N - j0 < GEMM_NR ? N - j0 : GEMM_NR;
      const int64_t gf = bcs == 1 && nc == GEMM_NR ? K / 4 : 0;  // groups by rows of B at once
      for (int64_t g = 0; g < gf; ++g) {
        gemm_bf16_interleave(B + (4 * g + 2) * brs + j0, -2 * brs, d + 2 * g * GEMM_NR);
        gemm_bf16_interleave(B + (4 * g + 3) * brs + j0, -2 * brs, d + (2 * g + 1) * GEMM_NR);
      }
      for (int64_t g = gf; g < G; ++g)
        for (int c = 0; c < GEMM_NR; ++c) {
          const uint64_t q = c < nc ? gemm_bf16_quad(gemm_bf16_load_quad(B + (j0 + c) * bcs, brs, g, K)) : 0;
          d[2 * g * GEMM_NR + c] = (uint32_t)q;
          d[(2 * g + 1) * GEMM_NR + c] = (uint32_t)(q >> 32);
        }
    }
    gemm_bf16_tiles<MR>(M, N, C, crs, ccs, [&](int64_t ib, int64_t jb, float* ct, int64_t ldc) {
      gemm_bf16_dp<MR>(G, (const uint32_t*)(const void*)(aq + ib * MR * G), 2 * G, bq + jb * G * 2 * GEMM_NR,
                       ct, ldc);
    });
    return;
  }
#endif
  (void)path;
  int64_t lda;
  const uint16_t* a = gemm_bf16_rows(A, M, K, ars, acs, MR, 1, lda);
  const int64_t KP = (K + 1) / 2;
  const uint32_t* bp = gemm_bf16_pack_pairs(B, N, K, brs, bcs, KP);
  gemm_bf16_tiles<MR>(M, N, C, crs, ccs, [&](int64_t ib, int64_t jb, float* ct, int64_t ldc) {
    gemm_bf16_fma<MR>(K, a + ib * MR * lda, lda, bp + jb * KP * GEMM_NR, ct, ldc);
  });
}

}  // namespace tc

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
// AMX operands [0] packed, [1] found already packed by an earlier call of the same launch (gemm_pack_cache)
__attribute__((visibility("default"))) long long tc_gemm_bf16_packs[2] = {0, 0};
// launches that may keep packed operands (tc::gemm_pack_launch)
__attribute__((visibility("default"))) unsigned long long tc_gemm_pack_launches = 0;
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

typedef uint16_t gemm_u16x32 __attribute__((vector_size(64)));

// two rows' 32 bf16 values x, y as 32 pair words x(c) | y(c) << 16: c = 0 .. 15 in lo, 16 .. 31 in hi (two
// vpermt2w where the machine has AVX-512 BW)
static inline void gemm_bf16_zip(gemm_u16x32 x, gemm_u16x32 y, gemm_u16x32& lo, gemm_u16x32& hi) {
  lo = __builtin_shufflevector(x, y, 0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                               8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47);
  hi = __builtin_shufflevector(x, y, 16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                               24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63);
}

// d[c] = s[c] | s[ld + c] << 16 for the NR columns c of two rows of B
static inline void gemm_bf16_interleave(const uint16_t* s, int64_t ld, uint32_t* d) {
#if defined(__AVX512BW__)
  if (GEMM_NR == 32) {
    gemm_u16x32 x, y, lo, hi;
    std::memcpy(&x, s, 64);
    std::memcpy(&y, s + ld, 64);
    gemm_bf16_zip(x, y, lo, hi);
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

// AMX's operands, packed so that every tile is 1 KB in one piece (16 rows of 64 bytes, 16 consecutive
// cache lines: loads from A's own rows, 2 KB apart at K = 1024, fell into two L1 sets and ran at 0.8 against
// 1.1-1.4 TFLOP/s, session 32).  A: 32-row strip ib, block q (32 k), half h (rows 16h .. 16h+15) at
// ap + ((ib * NQ + q) * 2 + h) * 512, row r's 32 k at + r * 32.  B: 32-column panel jb, block q, half h
// (columns 16h .. 16h+15) at bp + ((jb * NQ + q) * 2 + h) * 256 words, pair p's 16 words at + p * 16
// (b(k, j) | b(k+1, j) << 16).  Zeros past M, N and K.  The packing checks the header's range on the way
// (one pass over A and B, not two): each returns 1 if one of its elements is out of it.

// lanes of x that are not zero and outside 2^-56 <= |x| < 2^56 (or inf / NaN): nonzero
static inline gemm_u16x32 gemm_bf16_bad_lanes(gemm_u16x32 x) {
  const gemm_u16x32 t = x & (uint16_t)0x7fffu;
  return (gemm_u16x32)((t != 0) & ((gemm_u16x32)(t - (uint16_t)(71u << 7)) >= (uint16_t)(112u << 7)));
}

static inline int gemm_bf16_amx_pack_a(const uint16_t* A, int64_t M, int64_t K, int64_t ars, int64_t acs, int64_t NQ,
                                       uint16_t* __restrict__ ap) {
  const int64_t mp = (M + 31) / 32 * 32, kq = acs == 1 ? K / 32 : 0;
  gemm_u16x32 bad = {};
  uint16_t bad1 = 0;
  for (int64_t i = 0; i < mp; ++i) {
    uint16_t* __restrict__ d = ap + (i / 32) * NQ * 1024 + (i % 32) / 16 * 512 + (i % 16) * 32;
    if (i >= M) {
      for (int64_t q = 0; q < NQ; ++q) std::memset(d + q * 1024, 0, 64);
      continue;
    }
    const uint16_t* s = A + i * ars;
    for (int64_t q = 0; q < kq; ++q) {
      gemm_u16x32 x;
      std::memcpy(&x, s + q * 32, 64);
      bad |= gemm_bf16_bad_lanes(x);
      std::memcpy(d + q * 1024, &x, 64);
    }
    for (int64_t q = kq; q < NQ; ++q)
      for (int k = 0; k < 32; ++k) {
        const int64_t kk = q * 32 + k;
        const uint16_t x = kk < K ? s[kk * acs] : 0;
        bad1 |= gemm_bf16_out_of_range(&x, 1);
        d[q * 1024 + k] = x;
      }
  }
  for (int l = 0; l < 32; ++l) bad1 |= bad[l];
  return bad1 != 0;
}

static inline int gemm_bf16_amx_pack_b(const uint16_t* B, int64_t N, int64_t K, int64_t brs, int64_t bcs, int64_t NQ,
                                       uint32_t* __restrict__ bp) {
  const int64_t nb = (N + 31) / 32, nf = bcs == 1 || brs == 1 ? N / 32 : 0;
  const int64_t kf = !nf ? 0 : bcs == 1 ? K / 2 : K / 32 * 16;  // pairs of the whole panels packed by vectors
  gemm_u16x32 bad = {};
  uint16_t bad1 = 0;
  // rows of B contiguous: two rows interleaved (two vpermt2w), pair by pair across the panels (a row's
  // lines read one after the other: 1.9 -> 1.4 ms of packing at 1024^3 in 128 x 128 blocks, session 32)
  for (int64_t p = 0; bcs == 1 && p < kf; ++p)
    for (int64_t jb = 0; jb < nf; ++jb) {
      gemm_u16x32 x, y;
      std::memcpy(&x, B + 2 * p * brs + jb * 32, 64);
      std::memcpy(&y, B + (2 * p + 1) * brs + jb * 32, 64);
      bad |= gemm_bf16_bad_lanes(x) | gemm_bf16_bad_lanes(y);
      gemm_u16x32 lo, hi;
      gemm_bf16_zip(x, y, lo, hi);
      uint32_t* t = bp + jb * NQ * 512 + (p / 16) * 512 + (p % 16) * 16;
      std::memcpy(t, &lo, 64);
      std::memcpy(t + 256, &hi, 64);
    }
  // columns of B contiguous (a transposed B): a block's 16 pairs of a column are one vector
  for (int64_t jb = 0; bcs != 1 && jb < nf; ++jb)
    for (int c = 0; c < 32; ++c)
      for (int64_t q = 0; q < kf / 16; ++q) {
        gemm_u16x32 x;
        std::memcpy(&x, B + (jb * 32 + c) * bcs + q * 32, 64);
        bad |= gemm_bf16_bad_lanes(x);
        uint32_t w[16];
        std::memcpy(w, &x, 64);
        uint32_t* t = bp + jb * NQ * 512 + q * 512 + (c / 16) * 256 + c % 16;
#pragma GCC unroll 16
        for (int p = 0; p < 16; ++p) t[p * 16] = w[p];
      }
  // the rest: element by element (a transposed B, a part panel, an odd K's last pair, zeros past K)
  for (int64_t jb = 0; jb < nb; ++jb) {
    const int64_t j0 = jb * 32, nc = N - j0 < 32 ? N - j0 : 32;
    uint32_t* __restrict__ d = bp + jb * NQ * 512;
    for (int64_t p = jb < nf ? kf : 0; p < NQ * 16; ++p)
      for (int c = 0; c < 32; ++c) {
        const int64_t j = j0 + c, k = 2 * p;
        const uint16_t lo = c < nc && k < K ? B[k * brs + j * bcs] : 0;
        const uint16_t hi = c < nc && k + 1 < K ? B[(k + 1) * brs + j * bcs] : 0;
        bad1 |= gemm_bf16_out_of_range(&lo, 1) | gemm_bf16_out_of_range(&hi, 1);
        d[(p / 16) * 512 + (c / 16) * 256 + (p % 16) * 16 + c % 16] = (uint32_t)lo | (uint32_t)hi << 16;
      }
  }
  for (int l = 0; l < 32; ++l) bad1 |= bad[l];
  return bad1 != 0;
}

// Packed operands kept for the rest of a launch, per OpenMP thread: the blocks of a tile program that share
// an A strip or a B panel (a GEMM's blocks of one row, of one column) pack it once.  Only for operands the
// program never writes and that overlap none of its other tensors (the entry checks: codegen/cpp.py), so
// that their contents cannot change during the launch; the key is the operand's address, shape and
// strides, and the launch (gemm_pack_launch: a number per launch, 0 = keep nothing).  A hit is the same
// bytes the packing would write (and the same range flag): the results do not change.
// 1024^3 in 128 x 128 x 32 tiles, one thread: each A strip was packed 8 times, each B panel 8 times,
// 2.6 of 4.6 ms (session 32).
static inline uint64_t gemm_pack_launch(bool ok) {
  return ok ? __atomic_add_fetch(&tc_gemm_pack_launches, 1ull, __ATOMIC_RELAXED) : 0;
}

// [a, a + an) and [b, b + bn) share a byte
static inline bool gemm_overlaps(const void* a, int64_t an, const void* b, int64_t bn) {
  const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + (uintptr_t)bn && y < x + (uintptr_t)an;
}

struct GemmPackEntry {
  const void* p = nullptr;
  int64_t rows = 0, cols = 0, rs = 0, cs = 0;
  uint64_t launch = 0, used = 0;
  int bad = 0;
  void* data = nullptr;
  int64_t cap = 0;  // bytes
  ~GemmPackEntry() { std::free(data); }
};

// E entries of at most LIMIT bytes each (a bigger operand is packed into the scratch every call)
template <int E, int64_t LIMIT>
struct GemmPackCache {
  GemmPackEntry e[E];
  uint64_t tick = 0;
  // the entry holding this operand (hit) or the one to pack it into (a stale or the least recently used
  // one); nullptr: too big to keep
  GemmPackEntry* find(const void* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs, uint64_t launch,
                      int64_t bytes, bool& hit) {
    hit = false;
    if (bytes > LIMIT) return nullptr;
    GemmPackEntry* v = &e[0];
    for (GemmPackEntry& x : e) {
      if (x.launch == launch && x.p == p && x.rows == rows && x.cols == cols && x.rs == rs && x.cs == cs) {
        x.used = ++tick;
        hit = true;
        return &x;
      }
      const bool xs = x.launch != launch, vs = v->launch != launch;
      if ((xs && !vs) || (xs == vs && x.used < v->used)) v = &x;
    }
    if (v->cap < bytes) {
      std::free(v->data);
      v->cap = (bytes + 63) / 64 * 64;
      v->data = std::aligned_alloc(64, (size_t)v->cap);
      if (v->data == nullptr) {
        v->cap = 0;
        v->launch = 0;
        return nullptr;
      }
    }
    v->p = p, v->rows = rows, v->cols = cols, v->rs = rs, v->cs = cs, v->launch = launch, v->used = ++tick;
    return v;
  }
};

// A: two strips (the blocks of a row come one after another); B: eight panels (a row of blocks' panels).
// At most 2 x 4 MB + 8 x 1 MB per OpenMP thread that ran such a gemm, kept (and reused) until it exits;
// a 1024^3 GEMM in 128 x 128 tiles keeps 2.5 MB.
static inline GemmPackCache<2, (int64_t)4 << 20>& gemm_pack_cache_a() {
  static thread_local GemmPackCache<2, (int64_t)4 << 20> c;
  return c;
}
static inline GemmPackCache<8, (int64_t)1 << 20>& gemm_pack_cache_b() {
  static thread_local GemmPackCache<8, (int64_t)1 << 20> c;
  return c;
}

// one 32 x 32 C tile (ct, row stride ldc) += A's packed strip ap times B's packed panel bp (NQ blocks), one
// TDPBF16PS per 16 x 16 quarter and block.  With C in range (gemm_amx_c_in_range) C itself is the tiles'
// start: every running sum is then a multiple of 2^-126 (zero or at least 2^-126), so DAZ / FTZ never act
// and dst + (e + o) is the formula's step.  Else each block's product starts from zeroed tiles and is added
// to C in float32 vectors.  The loads sit between the products that do not read them (A0, B0, C00, B1, C01,
// A1, C10, C11): tiles are not renamed, so a load waits for the products reading its register.
static inline void gemm_bf16_amx(int64_t NQ, const uint16_t* ap, const uint32_t* bp, float* __restrict__ ct,
                                 int64_t ldc) {
  const int64_t s = 64;
#define TC_AMX_BLOCK                                                                                    \
  "tileloadd (%0,%4,1), %%tmm4\n\ttileloadd (%2,%4,1), %%tmm6\n\ttdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"    \
  "tileloadd (%3,%4,1), %%tmm7\n\ttdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"                                  \
  "tileloadd (%1,%4,1), %%tmm5\n\ttdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\ttdpbf16ps %%tmm7, %%tmm5, %%tmm3\n\t"
  if (gemm_amx_c_in_range(ct, ldc)) {
    const int64_t sc = ldc * 4;
    float *c0 = ct, *c1 = ct + 16, *c2 = ct + 16 * ldc, *c3 = ct + 16 * ldc + 16;
    __asm__ volatile("tileloadd (%0,%4,1), %%tmm0\n\ttileloadd (%1,%4,1), %%tmm1\n\t"
                     "tileloadd (%2,%4,1), %%tmm2\n\ttileloadd (%3,%4,1), %%tmm3"
                     : : "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(sc) : "memory");
    for (int64_t q = 0; q < NQ; ++q) {
      const uint16_t* a0 = ap + q * 1024;
      const uint32_t* b0 = bp + q * 512;
      __asm__ volatile(TC_AMX_BLOCK : : "r"(a0), "r"(a0 + 512), "r"(b0), "r"(b0 + 256), "r"(s) : "memory");
    }
    __asm__ volatile("tilestored %%tmm0, (%0,%4,1)\n\ttilestored %%tmm1, (%1,%4,1)\n\t"
                     "tilestored %%tmm2, (%2,%4,1)\n\ttilestored %%tmm3, (%3,%4,1)"
                     : : "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(sc) : "memory");
    return;
  }
  alignas(64) float d[32 * 32];
  const int64_t sd = 32 * 4;
  for (int64_t q = 0; q < NQ; ++q) {
    const uint16_t* a0 = ap + q * 1024;
    const uint32_t* b0 = bp + q * 512;
    __asm__ volatile(
        "tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3\n\t" TC_AMX_BLOCK
        "tilestored %%tmm0, (%5,%6,1)\n\ttilestored %%tmm1, (%7,%6,1)\n\t"
        "tilestored %%tmm2, (%8,%6,1)\n\ttilestored %%tmm3, (%9,%6,1)"
        :
        : "r"(a0), "r"(a0 + 512), "r"(b0), "r"(b0 + 256), "r"(s), "r"(d), "r"(sd), "r"(d + 16),
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
                      const bfloat16_t* B_, int64_t brs, int64_t bcs, TC* C, int64_t crs, int64_t ccs,
                      uint64_t launch = 0) {
  const uint16_t* A = (const uint16_t*)(const void*)A_;
  const uint16_t* B = (const uint16_t*)(const void*)B_;
  constexpr int MR = GEMM_BF16_MR;
  // 0 the FMAs, 1 vdpbf16ps, 2 AMX
  int path = 0;
#if defined(TC_GEMM_BF16_AMX)
  if (tc_gemm_bf16_dot && GEMM_NR == 32 && tc_gemm_bf16_amx && gemm_amx_granted()) {
    // packed first, the range checked on the way; out of range: the FMAs below
    const int64_t NQ = (K + GEMM_BF16_KB - 1) / GEMM_BF16_KB, mb = (M + 31) / 32, nb = (N + 31) / 32;
    // launch != 0: A and B are constant for the launch; an earlier call may have packed them
    bool hit_a = false, hit_b = false;
    GemmPackEntry* ea = launch ? gemm_pack_cache_a().find(A, M, K, ars, acs, launch, mb * NQ * 2048, hit_a) : nullptr;
    GemmPackEntry* eb = launch ? gemm_pack_cache_b().find(B, K, N, brs, bcs, launch, nb * NQ * 2048, hit_b) : nullptr;
    uint16_t* ap = ea ? (uint16_t*)ea->data : (uint16_t*)(void*)gemm_scratch(0).get(mb * NQ * 512);
    uint32_t* bp = eb ? (uint32_t*)eb->data : (uint32_t*)(void*)gemm_scratch(1).get(nb * NQ * 512);
    const int bad_a = hit_a ? ea->bad : gemm_bf16_amx_pack_a(A, M, K, ars, acs, NQ, ap);
    const int bad_b = hit_b ? eb->bad : gemm_bf16_amx_pack_b(B, N, K, brs, bcs, NQ, bp);
    if (ea) ea->bad = bad_a;
    if (eb) eb->bad = bad_b;
    __atomic_fetch_add(&tc_gemm_bf16_packs[0], (long long)!hit_a + !hit_b, __ATOMIC_RELAXED);
    __atomic_fetch_add(&tc_gemm_bf16_packs[1], (long long)hit_a + hit_b, __ATOMIC_RELAXED);
    const int bad = bad_a | bad_b;
    if (tc_gemm_bf16_dot == 2 || !bad) {
      __atomic_fetch_add(&tc_gemm_bf16_calls[2], 1, __ATOMIC_RELAXED);
      gemm_amx_configure();
      gemm_bf16_tiles<32>(M, N, C, crs, ccs, [&](int64_t ib, int64_t jb, float* ct, int64_t ldc) {
        gemm_bf16_amx(NQ, ap + ib * NQ * 1024, bp + jb * NQ * 512, ct, ldc);
      });
      __asm__ volatile("tilerelease" ::: "memory");
      return;
    }
  } else
#endif
  {
#if defined(TC_GEMM_BF16_DP)
    if (tc_gemm_bf16_dot == 2 ||
        (tc_gemm_bf16_dot == 1 && !gemm_bf16_matrix_out_of_range(A, M, K, ars, acs) &&
         !gemm_bf16_matrix_out_of_range(B, K, N, brs, bcs)))
      path = 1;
#endif
  }
  __atomic_fetch_add(&tc_gemm_bf16_calls[path], 1, __ATOMIC_RELAXED);
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

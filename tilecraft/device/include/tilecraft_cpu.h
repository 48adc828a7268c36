// tilecraft CPU target runtime: the scalar types and helpers generated C++ calls.
//
// The CPU target is the reference semantics, so every helper here favours being obviously right
// over being fast: 16-bit floats are stored as their IEEE/bfloat16 bit patterns and all
// arithmetic on them happens in float, rounding once (to nearest even) when a value is stored.
#pragma once
// No <cmath>, <limits> or <vector>: libm below is what this header needs of them, and they were two
// thirds of every kernel's compile before its own code (their precompiled form: 24 of 29 MB, ~0.02
// of ~0.04 CPU-s to load).  A program that pastes in its own code gets them (codegen: std_includes).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// A program may paste in functions written for both targets (T.import_source, guarding its PTX
// with #ifdef __CUDA_ARCH__); CUDA's function qualifiers mean nothing on the CPU.
#ifndef __CUDACC__
#ifndef __device__
#define __device__
#endif
#ifndef __host__
#define __host__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#endif

// The OpenMP threads a kernel's blocks run on (set by the runtime when the library is loaded,
// runtime/openmp.py: torch.get_num_threads(), bounded by the CPUs); 0: OpenMP's default.
extern "C" {
__attribute__((visibility("default"))) int tc_num_threads = 0;
int omp_get_max_threads(void);
int omp_get_num_threads(void);
}

namespace tc {

// The C library's math, as <cmath>'s std:: overloads call it (GCC's builtins: inlined where the
// machine has the instruction, libm's function otherwise); float arguments take the float forms.
namespace libm {
#define TC_LIBM1(name)                                                      \
  static inline float name(float x) { return __builtin_##name##f(x); }      \
  static inline double name(double x) { return __builtin_##name(x); }
TC_LIBM1(exp) TC_LIBM1(exp2) TC_LIBM1(log) TC_LIBM1(log2) TC_LIBM1(log10) TC_LIBM1(log1p)
TC_LIBM1(sqrt) TC_LIBM1(tanh) TC_LIBM1(erf) TC_LIBM1(floor) TC_LIBM1(ceil) TC_LIBM1(trunc)
TC_LIBM1(nearbyint) TC_LIBM1(sin) TC_LIBM1(cos) TC_LIBM1(tan) TC_LIBM1(sinh) TC_LIBM1(cosh)
TC_LIBM1(asin) TC_LIBM1(acos) TC_LIBM1(atan) TC_LIBM1(asinh) TC_LIBM1(acosh) TC_LIBM1(atanh)
TC_LIBM1(fabs)
#undef TC_LIBM1
#define TC_LIBM2(name)                                                                \
  static inline float name(float a, float b) { return __builtin_##name##f(a, b); }    \
  static inline double name(double a, double b) { return __builtin_##name(a, b); }
TC_LIBM2(pow) TC_LIBM2(fmod) TC_LIBM2(atan2) TC_LIBM2(hypot) TC_LIBM2(copysign) TC_LIBM2(nextafter)
TC_LIBM2(fmax) TC_LIBM2(fmin)
#undef TC_LIBM2
static inline double ldexp(double x, int e) { return __builtin_ldexp(x, e); }
static inline double frexp(double x, int* e) { return __builtin_frexp(x, e); }
static inline bool signbit(double x) { return __builtin_signbit(x); }
static inline bool isnan(double x) { return __builtin_isnan(x); }
static inline bool isinf(double x) { return __builtin_isinf(x); }
static inline bool isfinite(double x) { return __builtin_isfinite(x); }
// std::numeric_limits<T>::infinity() / quiet_NaN()
template <class T> static inline T inf();
template <> inline float inf<float>() { return __builtin_huge_valf(); }
template <> inline double inf<double>() { return __builtin_huge_val(); }
template <class T> static inline T qnan();
template <> inline float qnan<float>() { return __builtin_nanf(""); }
template <> inline double qnan<double>() { return __builtin_nan(""); }
}  // namespace libm

// threads for a grid of `nblocks` blocks: no more than the blocks
static inline int omp_threads(int64_t nblocks) {
  const int t = tc_num_threads > 0 ? tc_num_threads : omp_get_max_threads();
  return nblocks < (int64_t)t ? (int)(nblocks < 1 ? 1 : nblocks) : t;
}
// blocks a thread of the team takes at a time (the chunk of `schedule(dynamic, ...)`): one while
// the grid has fewer than 128 a thread, then 1/64 of a thread's share.  One at a time, each is a
// libgomp call and an atomic on a counter the threads share: 20 % of a 2-thread softmax
// (4096 x 1024 fp16, 1024 blocks of 4 rows, 1.35-1.65 -> 1.07-1.32 ms); 64 chunks a thread still
// balance a thread that the machine's other work holds up.  Inside the parallel region.
static inline int omp_chunk(int64_t nblocks) {
  const int64_t c = nblocks / ((int64_t)omp_get_num_threads() * 64);
  return c < 1 ? 1 : c > (1 << 20) ? (1 << 20) : (int)c;
}

// int4 (TileLang's T.int4): two elements a byte, the one at the even flat index in the low nibble,
// each a two's complement 4-bit integer, sign-extended when read.
static inline int8_t s4_get(const int8_t* p, int64_t i) {
  const int b = p[i >> 1];
  return (int8_t)(((i & 1) ? b : (int)(int8_t)(b << 4)) >> 4);
}
// the value's low 4 bits into the element's nibble, the other nibble kept
static inline void s4_set(int8_t* p, int64_t i, int v) {
  uint8_t* q = (uint8_t*)p + (i >> 1);
  const int sh = (int)(i & 1) * 4;
  *q = (uint8_t)((*q & ~(0xF << sh)) | ((v & 0xF) << sh));
}
// a byte of a global tensor may hold elements of two blocks' tiles, run on two OpenMP threads:
// clear and set the nibble with atomic operations on the byte, leaving the other nibble alone
static inline void s4_set_atomic(int8_t* p, int64_t i, int v) {
  uint8_t* q = (uint8_t*)p + (i >> 1);
  const int sh = (int)(i & 1) * 4;
  __atomic_fetch_and(q, (uint8_t)~(0xF << sh), __ATOMIC_RELAXED);
  __atomic_fetch_or(q, (uint8_t)((v & 0xF) << sh), __ATOMIC_RELAXED);
}
// a conversion into int4: the low 4 bits, as any narrowing integer conversion wraps
// (a float is first converted to an integer, truncating toward zero)
template <class T> static inline int8_t to_s4(T x) {
  const int64_t v = (int64_t)x;
  return (int8_t)((int8_t)((uint8_t)v << 4) >> 4);
}

static inline uint32_t f2u(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// IEEE binary16.  Conversions are exact bit manipulations (no reliance on compiler _Float16),
// written without branches (every case computed, the right one selected) so that a loop of them
// vectorizes: GCC has no vector form of _Float16 conversions without AVX-512 FP16.
struct half_t {
  uint16_t bits;
  half_t() = default;
  half_t(float f) : bits(from_float(f)) {}
  half_t(double d) : bits(from_float((float)d)) {}
  half_t(int i) : bits(from_float((float)i)) {}
  half_t(int64_t i) : bits(from_float((float)i)) {}
  operator float() const { return to_float(bits); }
  // round to nearest even; overflow to inf; NaNs become the one canonical NaN (sign kept)
  static uint16_t from_float(float f) {
    const uint32_t x = f2u(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7fffffffu;
    // normal: rebias the exponent, round the 13 dropped bits to nearest even (a carry out of the
    // mantissa steps the exponent); inputs clamped at 65536, so that 65520 and up give inf
    const uint32_t c = absx < 0x47800000u ? absx : 0x47800000u;
    const uint32_t norm = (c + 0xc8000fffu + ((c >> 13) & 1u)) >> 13;
    // subnormal or zero in half (below 2^-14): adding 0.5 puts the value's half-subnormal units
    // (2^-24) in the low mantissa bits of the float sum, rounded to nearest even by the addition
    const uint32_t sub = f2u(u2f(absx) + 0.5f) - 0x3f000000u;
    // selected by masks (GCC's vectorizer refuses these selects written as ?: once inlined)
    const uint32_t is_sub = 0u - (uint32_t)(absx < 0x38800000u), is_nan = 0u - (uint32_t)(absx > 0x7f800000u);
    const uint32_t h = (((sub & is_sub) | (norm & ~is_sub)) & ~is_nan) | (0x7e00u & is_nan);
    return (uint16_t)(sign | h);
  }
  static float to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    const float sub = (float)(int)mant * 5.9604644775390625e-08f;  // exact (2^-24 units)
    const uint32_t norm = ((exp + 112u) << 23) | (mant << 13);
    const uint32_t special = 0x7f800000u | (mant << 13);  // inf / NaN, payload kept
    const uint32_t mag = exp == 0 ? f2u(sub) : exp == 31 ? special : norm;
    return u2f(sign | mag);
  }
};

// bfloat16: the top half of a float32, rounded to nearest even.
struct bfloat16_t {
  uint16_t bits;
  bfloat16_t() = default;
  bfloat16_t(float f) : bits(from_float(f)) {}
  bfloat16_t(double d) : bits(from_float((float)d)) {}
  bfloat16_t(int i) : bits(from_float((float)i)) {}
  bfloat16_t(int64_t i) : bits(from_float((float)i)) {}
  operator float() const { return u2f((uint32_t)bits << 16); }
  static uint16_t from_float(float f) {
    const uint32_t x = f2u(f);
    const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
    // a NaN stays a (quiet) NaN; a select, not a branch, so that conversion loops vectorize
    return (x & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((x >> 16) | 0x40u) : (uint16_t)(rounded >> 16);
  }
};

// 8-bit floats (OCP FP8): E4M3 "fn" (bias 7, no infinities, NaN = S.1111.111, largest 448) and
// E5M2 (bias 15, IEEE-like infinities/NaNs, largest 57344), stored as their bit patterns.
// float -> fp8 rounds to nearest even and saturates to the largest finite value (NaN stays NaN),
// as the CUDA target's __nv_fp8_* constructors do (__NV_SATFINITE); fp8 -> float is exact.
template <int EXP, int MAN, bool FN>
struct fp8_base {
  static constexpr int BIAS = (1 << (EXP - 1)) - 1;
  // the largest finite encoding (magnitude bits): E4M3FN S.1111.110, E5M2 S.11110.11
  static constexpr uint8_t MAX_BITS = FN ? (uint8_t)0x7e : (uint8_t)(((((1 << EXP) - 2) << MAN) | ((1 << MAN) - 1)));
  static constexpr uint8_t NAN_BITS = FN ? (uint8_t)0x7f : (uint8_t)(((1 << EXP) - 1) << MAN | (1 << (MAN - 1)));
  static double decode(uint8_t b) {
    const int e = (b >> MAN) & ((1 << EXP) - 1), m = b & ((1 << MAN) - 1);
    const bool neg = (b & 0x80) != 0;
    double v;
    if (FN ? (e == (1 << EXP) - 1 && m == (1 << MAN) - 1) : (e == (1 << EXP) - 1 && m != 0))
      v = libm::qnan<double>();
    else if (!FN && e == (1 << EXP) - 1)
      v = libm::inf<double>();
    else if (e == 0)
      v = libm::ldexp((double)m, 1 - BIAS - MAN);
    else
      v = libm::ldexp((double)((1 << MAN) | m), e - BIAS - MAN);
    return neg ? -v : v;
  }
  static uint8_t encode(double f) {
    const uint8_t sign = libm::signbit(f) ? 0x80 : 0x00;
    if (libm::isnan(f)) return (uint8_t)(sign | NAN_BITS);
    const double a = libm::fabs(f);
    if (a >= decode(MAX_BITS)) return (uint8_t)(sign | MAX_BITS);  // saturate (inf included)
    const double min_normal = libm::ldexp(1.0, 1 - BIAS);
    if (a < min_normal) {  // subnormal: multiples of 2^(1-BIAS-MAN), ties to even
      const double q = libm::nearbyint(libm::ldexp(a, BIAS - 1 + MAN));
      return (uint8_t)(sign | (uint8_t)q);  // q == 2^MAN is the smallest normal: same encoding
    }
    int e;
    libm::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
    e -= 1;             // a in [2^e, 2^(e+1))
    double m = libm::nearbyint(libm::ldexp(a, MAN - e));  // in [2^MAN, 2^(MAN+1)]
    if (m >= (double)(2 << MAN)) { m = (double)(1 << MAN); e += 1; }
    uint8_t b = (uint8_t)(((e + BIAS) << MAN) | ((int)m - (1 << MAN)));
    if (b > MAX_BITS) b = MAX_BITS;
    return (uint8_t)(sign | b);
  }
  // The same two conversions for float, on the bits and without branches (every case computed,
  // the right one selected), so that a loop of them vectorizes: the double forms above call libm
  // (frexp, ldexp, nearbyint) per value, ~35 ns; these are what a cast-heavy kernel runs.
  // encode_f32(f) == encode((double)f) and to_f32(b) == (float)decode(b) for every f and b
  // (float -> double is exact; tests/cpu/test_fp8.py checks every fp8 value and every rounding
  // boundary; the NaN decode is the canonical quiet NaN with the sign, as (float)quiet_NaN).
  static uint8_t encode_f32(float f) {
    const uint32_t x = f2u(f);
    const uint32_t sign = (x >> 24) & 0x80u, ax = x & 0x7fffffffu;
    constexpr int SHIFT = 23 - MAN;
    // normal in fp8: rebias the exponent, round the SHIFT dropped bits to nearest even (a carry out
    // of the mantissa steps the exponent; the top of the range is saturated below)
    const uint32_t norm = (ax - ((uint32_t)(127 - BIAS) << 23) + ((1u << (SHIFT - 1)) - 1u) + ((ax >> SHIFT) & 1u)) >> SHIFT;
    // subnormal in fp8 (below 2^(1-BIAS)): adding 2^(24-BIAS-MAN), whose float ulp is the fp8
    // subnormal unit 2^(1-BIAS-MAN), rounds to nearest even in the addition; the unit count is the
    // sum's low bits (2^MAN units: the smallest normal, the same encoding)
    constexpr uint32_t MAGIC = (uint32_t)(127 + 24 - BIAS - MAN) << 23;
    const uint32_t sub = f2u(u2f(ax) + u2f(MAGIC)) - MAGIC;
    constexpr uint32_t MIN_NORMAL = (uint32_t)(127 + 1 - BIAS) << 23;
    const uint32_t max_f = f2u((float)decode(MAX_BITS));  // exact in float
    const uint32_t is_sub = 0u - (uint32_t)(ax < MIN_NORMAL);
    const uint32_t is_sat = 0u - (uint32_t)(ax >= max_f);   // infinities included
    const uint32_t is_nan = 0u - (uint32_t)(ax > 0x7f800000u);
    uint32_t b = (sub & is_sub) | (norm & ~is_sub);
    b = (b & ~is_sat) | ((uint32_t)MAX_BITS & is_sat);
    b = (b & ~is_nan) | ((uint32_t)NAN_BITS & is_nan);
    return (uint8_t)(sign | b);
  }
  static float to_f32(uint8_t bits) {
    const uint32_t b = bits;
    const uint32_t sign = (b & 0x80u) << 24;
    const uint32_t e = (b >> MAN) & ((1u << EXP) - 1u), m = b & ((1u << MAN) - 1u);
    const float sub = (float)(int)m * u2f((uint32_t)(127 + 1 - BIAS - MAN) << 23);  // exact
    const uint32_t norm = ((e + (uint32_t)(127 - BIAS)) << 23) | (m << (23 - MAN));
    const uint32_t top = (1u << EXP) - 1u;
    const bool nan = FN ? (e == top && m == (1u << MAN) - 1u) : (e == top && m != 0u);
    const bool inf = !FN && e == top && m == 0u;
    const uint32_t mag = nan ? 0x7fc00000u : inf ? 0x7f800000u : e == 0u ? f2u(sub) : norm;
    return u2f(sign | mag);
  }
};

template <int EXP, int MAN, bool FN>
struct fp8_t {
  uint8_t bits;
  fp8_t() = default;
  fp8_t(float f) : bits(fp8_base<EXP, MAN, FN>::encode_f32(f)) {}
  fp8_t(double d) : bits(fp8_base<EXP, MAN, FN>::encode(d)) {}
  fp8_t(int i) : bits(fp8_base<EXP, MAN, FN>::encode((double)i)) {}
  fp8_t(int64_t i) : bits(fp8_base<EXP, MAN, FN>::encode((double)i)) {}
  fp8_t(half_t h) : bits(fp8_base<EXP, MAN, FN>::encode_f32((float)h)) {}
  fp8_t(bfloat16_t h) : bits(fp8_base<EXP, MAN, FN>::encode_f32((float)h)) {}
  operator float() const { return fp8_base<EXP, MAN, FN>::to_f32(bits); }
};
typedef fp8_t<4, 3, true> fp8_e4m3_t;
typedef fp8_t<5, 2, false> fp8_e5m2_t;

// T.rng_init / T.rng_rand: Philox4x32-10 in cuRAND's stream layout (the CUDA twin and its notes:
// tilecraft/random.h).  One generator per block: a block's statements run on one CPU thread.

struct Philox4x32 {
  uint32_t ctr[4], key[2], out[4];
  uint32_t pos;  // next output word (0..3)

  inline void block() {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; ++r) {
      if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
      const uint32_t hi0 = (uint32_t)(((uint64_t)0xD2511F53u * c0) >> 32), lo0 = 0xD2511F53u * c0;
      const uint32_t hi1 = (uint32_t)(((uint64_t)0xCD9E8D57u * c2) >> 32), lo1 = 0xCD9E8D57u * c2;
      c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
  }
  inline void advance(uint64_t n) {  // counter += n (128-bit)
    const uint64_t lo = ((uint64_t)ctr[1] << 32 | ctr[0]) + n;
    const uint32_t carry = lo < n ? 1u : 0u;
    ctr[0] = (uint32_t)lo; ctr[1] = (uint32_t)(lo >> 32);
    if (carry && ++ctr[2] == 0) ++ctr[3];
  }
  inline void init(uint64_t seed, uint64_t subsequence, uint64_t offset) {
    key[0] = (uint32_t)seed; key[1] = (uint32_t)(seed >> 32);
    ctr[0] = ctr[1] = 0; ctr[2] = (uint32_t)subsequence; ctr[3] = (uint32_t)(subsequence >> 32);
    pos = (uint32_t)(offset & 3);
    advance(offset >> 2);
    block();
  }
  inline uint32_t next() {
    const uint32_t r = out[pos];
    if (++pos == 4) { pos = 0; advance(1); block(); }
    return r;
  }
};
inline void rng_init(Philox4x32& g, uint64_t seed, uint64_t seq, uint64_t off) { g.init(seed, seq, off); }
inline uint32_t rng_rand(Philox4x32& g) { return g.next(); }



// T.reinterpret: the bits of `x` as a `To` of the same size.
template <class To, class From> static inline To bit_cast(const From& x) {
  static_assert(sizeof(To) == sizeof(From), "T.reinterpret needs types of the same width");
  To y;
  std::memcpy(&y, &x, sizeof(To));
  return y;
}

template <class T> static inline T infinity() { return T(libm::inf<float>()); }
template <> inline double infinity<double>() { return libm::inf<double>(); }
// 8-bit floats are built from their bits: float -> fp8 saturates, which would turn an infinity into
// the largest finite value.  float8_e4m3fn has no infinity (T.infinity refuses it).
template <class T> static inline T fp8_from_bits(uint8_t bits) {
  T r;
  r.bits = bits;
  return r;
}
template <> inline fp8_e5m2_t infinity<fp8_e5m2_t>() { return fp8_from_bits<fp8_e5m2_t>(0x7c); }
template <class T> static inline T neg_infinity();  // -inf of an 8-bit float (no unary minus)
template <> inline fp8_e5m2_t neg_infinity<fp8_e5m2_t>() { return fp8_from_bits<fp8_e5m2_t>(0xfc); }
template <class T> static inline T nan() { return T(libm::qnan<float>()); }
template <> inline double nan<double>() { return libm::qnan<double>(); }

// Python semantics for // and % (round toward negative infinity).
template <class T> static inline T floordiv(T a, T b) {
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  return q;
}
template <class T> static inline T floormod(T a, T b) {
  T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
static inline float floordiv(float a, float b) { return libm::floor(a / b); }
static inline double floordiv(double a, double b) { return libm::floor(a / b); }
static inline float floormod(float a, float b) { return a - libm::floor(a / b) * b; }
static inline double floormod(double a, double b) { return a - libm::floor(a / b) * b; }

template <class T> static inline T max(T a, T b) { return a > b ? a : b; }
template <class T> static inline T min(T a, T b) { return a < b ? a : b; }
// fmax / fmin (a NaN operand yields the other one), spelled so that they inline and vectorize; between
// equal zeros (C leaves the choice open) the second operand, as x86's maxss / minss choose
static inline float max(float a, float b) { return a != a ? b : b != b ? a : a > b ? a : b; }
static inline float min(float a, float b) { return a != a ? b : b != b ? a : a < b ? a : b; }
static inline double max(double a, double b) { return libm::fmax(a, b); }
static inline double min(double a, double b) { return libm::fmin(a, b); }

// float exp / exp2 / exp10: 2^y for y = x * log2(base) in double (exact enough: the product's relative
// error 2^-53 moves the result by less than 2^-45 of it), as 2^n * p(y - n) with n = rint(y) and p a
// degree-7 polynomial on [-1/2, 1/2] (relative error 6e-11), evaluated in double (fused multiply-adds:
// exactly defined, so every machine gets the same bits, from the FMA unit or libm's fma) and rounded
// once to float: within 0.501 ulp of the exact value over every float input (measured against double exp
// at every 97th bit pattern; glibc's expf: 0.502; torch's vectorized expf, SLEEF's u10: 1.0), with
// subnormal results rounded once, +-inf / NaN / overflow / underflow exact.  Straight-line code
// (selects, no calls or branches), so a loop of it vectorizes, and a vectorized loop gives the
// same bits as the scalar code: the reference does not depend on how the compiler vectorized.
static inline float exp2_to_float(double y) {
  y = y > 129.0 ? 129.0 : y;  // the result is +inf from 128 up, 0 below -150; NaN passes both
  y = y < -151.0 ? -151.0 : y;
  const double magic = 6755399441055744.0;  // 1.5 * 2^52: y + magic rounds y to the integer n
  const double t = y + magic;
  const double f = y - (t - magic);  // in [-1/2, 1/2], exact
  double p = 1.5303699001378845e-05;
  p = __builtin_fma(p, f, 0.00015469729140704658);
  p = __builtin_fma(p, f, 0.0013333478480888061);
  p = __builtin_fma(p, f, 0.009618025613598036);
  p = __builtin_fma(p, f, 0.055504109063177154);
  p = __builtin_fma(p, f, 0.24022651213495422);
  p = __builtin_fma(p, f, 0.6931471805568341);
  p = __builtin_fma(p, f, 0.9999999999595622);
  uint64_t tb, scale;
  std::memcpy(&tb, &t, 8);
  const double m = magic;
  uint64_t mb;
  std::memcpy(&mb, &m, 8);
  scale = (tb - mb + 1023u) << 52;  // the bits of 2^n (n in [-151, 129]: a normal double)
  double s;
  std::memcpy(&s, &scale, 8);
  return (float)(p * s);  // exact in double, one rounding to float (subnormals included)
}

// float exp2 (the softmax / attention workhorse): the same reduction in float, 2^f by the same
// polynomial with fused multiply-adds in float, and 2^n applied as two exact power-of-two factors
// (one rounding, two for a subnormal result): within 0.82 ulp of the exact value over every float
// input (measured as above; torch's vectorized exp2f: 1.0), about twice the speed of the double path
// (8 lanes per AVX2 vector instead of 4).  exp / exp10 keep the double path: their argument
// x * log2(base) rounded to float would cost up to 60 ulp.
static inline float exp2_float(float x) {
  x = x > 129.0f ? 129.0f : x;  // NaN passes both
  x = x < -151.0f ? -151.0f : x;
  const float magic = 12582912.0f;  // 1.5 * 2^23: x + magic rounds x to the integer n
  const float t = x + magic;
  const float f = x - (t - magic);  // in [-1/2, 1/2], exact
  float p = 1.5303699001378845e-05f;
  p = __builtin_fmaf(p, f, 0.00015469729140704658f);
  p = __builtin_fmaf(p, f, 0.0013333478480888061f);
  p = __builtin_fmaf(p, f, 0.009618025613598036f);
  p = __builtin_fmaf(p, f, 0.055504109063177154f);
  p = __builtin_fmaf(p, f, 0.24022651213495422f);
  p = __builtin_fmaf(p, f, 0.6931471805568341f);
  p = __builtin_fmaf(p, f, 1.0f);
  uint32_t tb;
  std::memcpy(&tb, &t, 4);
  const int32_t n = (int32_t)(tb - 0x4B400000u), n1 = n >> 1, n2 = n - n1;  // n in [-151, 129]
  const uint32_t s1 = (uint32_t)(n1 + 127) << 23, s2 = (uint32_t)(n2 + 127) << 23;  // normal powers of 2
  float f1, f2;
  std::memcpy(&f1, &s1, 4);
  std::memcpy(&f2, &s2, 4);
  return (p * f1) * f2;
}

#define TC_MATH1(name, expr_f, expr_d)                                  \
  static inline float name(float x) { return expr_f; }                  \
  static inline double name(double x) { return expr_d; }
TC_MATH1(exp, exp2_to_float((double)x * 1.4426950408889634), libm::exp(x))
TC_MATH1(exp2, exp2_float(x), libm::exp2(x))
TC_MATH1(exp10, exp2_to_float((double)x * 3.3219280948873622), libm::pow(10.0, x))
TC_MATH1(log, libm::log(x), libm::log(x))
TC_MATH1(log2, libm::log2(x), libm::log2(x))
TC_MATH1(log10, libm::log10(x), libm::log10(x))
TC_MATH1(log1p, libm::log1p(x), libm::log1p(x))
TC_MATH1(sqrt, libm::sqrt(x), libm::sqrt(x))
TC_MATH1(rsqrt, 1.0f / libm::sqrt(x), 1.0 / libm::sqrt(x))
TC_MATH1(tanh, libm::tanh(x), libm::tanh(x))
TC_MATH1(sigmoid, 1.0f / (1.0f + exp2_to_float((double)x * -1.4426950408889634)), 1.0 / (1.0 + libm::exp(-x)))
TC_MATH1(erf, libm::erf(x), libm::erf(x))
TC_MATH1(floor, libm::floor(x), libm::floor(x))
TC_MATH1(ceil, libm::ceil(x), libm::ceil(x))
TC_MATH1(round, libm::nearbyint(x), libm::nearbyint(x))
TC_MATH1(trunc, libm::trunc(x), libm::trunc(x))
TC_MATH1(sin, libm::sin(x), libm::sin(x))
TC_MATH1(cos, libm::cos(x), libm::cos(x))
TC_MATH1(tan, libm::tan(x), libm::tan(x))
TC_MATH1(sinh, libm::sinh(x), libm::sinh(x))
TC_MATH1(cosh, libm::cosh(x), libm::cosh(x))
TC_MATH1(asin, libm::asin(x), libm::asin(x))
TC_MATH1(acos, libm::acos(x), libm::acos(x))
TC_MATH1(atan, libm::atan(x), libm::atan(x))
TC_MATH1(asinh, libm::asinh(x), libm::asinh(x))
TC_MATH1(acosh, libm::acosh(x), libm::acosh(x))
TC_MATH1(atanh, libm::atanh(x), libm::atanh(x))
TC_MATH1(nearbyint, libm::nearbyint(x), libm::nearbyint(x))
#undef TC_MATH1
#define TC_MATH2(name, fn)                                                      \
  static inline float name(float a, float b) { return fn(a, b); }               \
  static inline double name(double a, double b) { return fn(a, b); }
TC_MATH2(hypot, libm::hypot)
TC_MATH2(copysign, libm::copysign)
TC_MATH2(nextafter, libm::nextafter)
#undef TC_MATH2
// a * b + c rounded once (vfmadd with -march=native; libm's exact fma elsewhere)
static inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static inline double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
// T.clz / T.popcount on 32- and 64-bit integers (clz of 0 is the width, as CUDA's __clz)
static inline int clz(uint32_t x) { return x ? __builtin_clz(x) : 32; }
static inline int clz(int32_t x) { return clz((uint32_t)x); }
static inline int clz(uint64_t x) { return x ? __builtin_clzll(x) : 64; }
static inline int clz(int64_t x) { return clz((uint64_t)x); }
static inline int popcount(uint32_t x) { return __builtin_popcount(x); }
static inline int popcount(int32_t x) { return popcount((uint32_t)x); }
static inline int popcount(uint64_t x) { return __builtin_popcountll(x); }
static inline int popcount(int64_t x) { return popcount((uint64_t)x); }
static inline float pow(float a, float b) { return libm::pow(a, b); }
static inline double pow(double a, double b) { return libm::pow(a, b); }
static inline float fmod(float a, float b) { return libm::fmod(a, b); }
static inline double fmod(double a, double b) { return libm::fmod(a, b); }
static inline float atan2(float a, float b) { return libm::atan2(a, b); }
template <class T> static inline T abs(T x) { return x < 0 ? -x : x; }
static inline float abs(float x) { return libm::fabs(x); }
static inline double abs(double x) { return libm::fabs(x); }
static inline half_t abs(half_t x) { half_t r; r.bits = x.bits & 0x7fffu; return r; }
static inline bfloat16_t abs(bfloat16_t x) { bfloat16_t r; r.bits = x.bits & 0x7fffu; return r; }
template <int E, int M, bool FN> static inline fp8_t<E, M, FN> abs(fp8_t<E, M, FN> x) {
  fp8_t<E, M, FN> r; r.bits = x.bits & 0x7fu; return r;
}
template <class T> static inline bool isnan(T x) { return libm::isnan((double)(float)x); }
static inline bool isnan(double x) { return libm::isnan(x); }
template <class T> static inline bool isinf(T x) { return libm::isinf((double)(float)x); }
static inline bool isinf(double x) { return libm::isinf(x); }
template <class T> static inline bool isfinite(T x) { return libm::isfinite((double)(float)x); }
static inline bool isfinite(double x) { return libm::isfinite(x); }

// T.reduce_sum / abssum / max / min / absmax of a float32-accumulated tile, one output element: the
// n elements p[0], p[s], ..., p[(n - 1) s], each converted to float (|x| for abssum / absmax), folded
// in this fixed order: element i into lane i % 8 (each lane starting from the identity and folding
// its elements in order), the lanes pairwise ((0 1)(2 3))((4 5)(6 7)), and the result into `init`
// (the destination's value, or the identity when the reduction clears it): init op lanes.  The
// order does not depend on the machine or on whether the compiler vectorized the loop (8 lanes are
// one AVX2 vector), so the reference stays one value; a GPU's reduction has its own tree order.
struct ReduceSum {
  static float id() { return 0.0f; }
  static float in(float x) { return x; }
  static float f(float a, float b) { return a + b; }
};
struct ReduceAbsSum : ReduceSum {
  static float in(float x) { return libm::fabs(x); }
};
struct ReduceMax {
  static float id() { return -libm::inf<float>(); }
  static float in(float x) { return x; }
  static float f(float a, float b) { return max(a, b); }
};
struct ReduceAbsMax : ReduceMax {
  static float id() { return 0.0f; }
  static float in(float x) { return libm::fabs(x); }
};
struct ReduceMin {
  static float id() { return libm::inf<float>(); }
  static float in(float x) { return x; }
  static float f(float a, float b) { return min(a, b); }
};
// (FAST: float32 sums, maxima and minima take the forms in tilecraft_cpu_vec.h, the same values;
// false names this loop itself)
template <class R, class T, bool FAST = true>
static inline float reduce_row(const T* __restrict__ p, int64_t n, int64_t s, float init) {
  float lane[8];
  for (int l = 0; l < 8; ++l) lane[l] = R::id();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lane[l] = R::f(lane[l], R::in((float)p[(i + l) * s]));
  for (int l = 0; i < n; ++i, ++l) lane[l] = R::f(lane[l], R::in((float)p[i * s]));
  const float lo = R::f(R::f(lane[0], lane[1]), R::f(lane[2], lane[3]));
  const float hi = R::f(R::f(lane[4], lane[5]), R::f(lane[6], lane[7]));
  return R::f(init, R::f(lo, hi));
}

// Atomics across OpenMP threads (blocks run concurrently); each returns the value it replaced
// (T.atomic_*(..., return_prev=True)), like CUDA's.  Types with native support use the compiler's
// atomic builtins; 16-bit floats use a compare-and-swap loop on their bits.
template <class T> static inline T atomic_add(T* p, T v) {
  T old;
#pragma omp atomic capture
  { old = *p; *p += v; }
  return old;
}
// Ordered loads and stores (T.atomic_load / T.atomic_store); Order 0 relaxed, 1 acquire / release, 2 seq_cst.
template <int Order, class T> static inline T atomic_load(const T* p) {
  T v;
  __atomic_load(p, &v, Order == 0 ? __ATOMIC_RELAXED : Order == 1 ? __ATOMIC_ACQUIRE : __ATOMIC_SEQ_CST);
  return v;
}
template <int Order, class T> static inline void atomic_store(T* p, T v) {
  __atomic_store(p, &v, Order == 0 ? __ATOMIC_RELAXED : Order == 1 ? __ATOMIC_RELEASE : __ATOMIC_SEQ_CST);
}
template <class T> static inline T atomic_max(T* p, T v) {
  T old;
#pragma omp critical(tc_atomic_minmax)
  { old = *p; if (v > *p) *p = v; }
  return old;
}
template <class T> static inline T atomic_min(T* p, T v) {
  T old;
#pragma omp critical(tc_atomic_minmax)
  { old = *p; if (v < *p) *p = v; }
  return old;
}
template <class H> static inline H atomic_add16(H* p, H v) {
  uint16_t* bits = &p->bits;
  uint16_t old = __atomic_load_n(bits, __ATOMIC_RELAXED);
  while (true) {
    H cur; cur.bits = old;
    H next = H((float)cur + (float)v);
    if (__atomic_compare_exchange_n(bits, &old, next.bits, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return cur;
  }
}
static inline half_t atomic_add(half_t* p, half_t v) { return atomic_add16(p, v); }
static inline bfloat16_t atomic_add(bfloat16_t* p, bfloat16_t v) { return atomic_add16(p, v); }

static inline void print_value(double v) { std::printf("%g", v); }
static inline void print_value(float v) { std::printf("%g", (double)v); }
static inline void print_value(half_t v) { std::printf("%g", (double)(float)v); }
static inline void print_value(bfloat16_t v) { std::printf("%g", (double)(float)v); }
static inline void print_value(fp8_e4m3_t v) { std::printf("%g", (double)(float)v); }
static inline void print_value(fp8_e5m2_t v) { std::printf("%g", (double)(float)v); }
static inline void print_value(bool v) { std::printf("%s", v ? "true" : "false"); }
static inline void print_value(int v) { std::printf("%d", v); }
static inline void print_value(int64_t v) { std::printf("%lld", (long long)v); }
template <class T> static inline void print_value(T v) { std::printf("%lld", (long long)v); }

template <class T> static inline void print(const char* msg, T v, int bx, int by, int bz) {
#pragma omp critical(tc_print)
  {
    std::printf("%s: block (%d, %d, %d): ", msg, bx, by, bz);
    print_value(v);
    std::printf("\n");
    std::fflush(stdout);
  }
}

// ---- mbarriers a program drives itself (T.alloc_barrier; ir/hopper.py) -------------------------
// One CPU thread runs a whole block in program order, so an mbarrier is a counter: its 64-bit word
// holds the arrivals expected per phase (bits 0-19), the arrivals of the running phase (20-39) and
// the number of completed phases (40-63).  An arrival stands for all the threads that run it.  A
// wait for a phase that has not completed could only be satisfied by a later statement: the
// program has no sequential meaning, and the wait records its site (the kernel then fails with
// the user's line, ir/intrinsics/manual_sync.py) instead of hanging.
static inline int& cpu_mbar_failed() { static int site = 0; return site; }
static inline void cpu_mbar_init(uint64_t* bar, int count) { *bar = (uint64_t)(count & 0xFFFFF); }
static inline void cpu_mbar_arrive(uint64_t* bar, int count) {
  uint64_t expect = *bar & 0xFFFFF, pending = (*bar >> 20) & 0xFFFFF, phases = *bar >> 40;
  if (expect == 0) return;
  for (uint64_t n = (uint64_t)count; n > 0;) {
    uint64_t take = expect - pending < n ? expect - pending : n;
    pending += take;
    n -= take;
    if (pending == expect) { pending = 0; ++phases; }
  }
  *bar = expect | (pending << 20) | (phases << 40);
}
static inline void cpu_mbar_wait(uint64_t* bar, int parity, int site) {
  uint64_t phases = *bar >> 40;  // the running phase's parity is phases & 1
  if ((int)(phases & 1) != (parity & 1)) return;
  int none = 0;  // the first failing wait is the one to report
  __atomic_compare_exchange_n(&cpu_mbar_failed(), &none, site, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

// T.device_assert on the CPU target: a false condition throws out of its block's body, which records
// the first failure's text (blocks run on OpenMP threads) and stops; blocks not yet started skip; the
// entry returns -1 and the runtime raises a TilecraftError with the text (codegen/cpp.py).
struct AssertFailed { const char* where; };
static inline const char*& cpu_assert_text() { static const char* text = nullptr; return text; }
static inline void cpu_assert(bool ok, const char* where) {
  if (!ok) throw AssertFailed{where};
}
// An integer division by a divisor known only at run time (codegen/cpp.py): a zero divisor throws like a
// false assertion (the entry returns -1, the runtime raises a TilecraftError naming the kernel) instead
// of raising SIGFPE, which would take the Python process down.
template <class T> static inline T nonzero(T b, const char* where) {
  if (b == 0) throw AssertFailed{where};
  return b;
}
static inline void cpu_assert_record(const char* where) {
  const char* none = nullptr;
  __atomic_compare_exchange_n(&cpu_assert_text(), &none, where, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

// Per-thread storage of a kernel's large on-chip buffers (codegen/cpp.py): zeroed bytes, aligned
// for any scalar; not a std::vector, whose instantiation per element type costs compile time.  An
// allocation that fails records `what` (the buffer, its bytes, the user's line) as a false assertion
// does: the blocks skip, the entry returns -1 and the runtime raises a TilecraftError with it --
// never a null pointer used, never an exception out of the OpenMP region (which would end the process).
struct Storage {
  void* p;
  Storage(size_t bytes, const char* what) : p(std::calloc(bytes ? bytes : 1, 1)) {
    if (p == nullptr) cpu_assert_record(what);
  }
  ~Storage() { std::free(p); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

}  // namespace tc

#include "tilecraft_cpu_gemm.h"
#include "tilecraft_cpu_vec.h"

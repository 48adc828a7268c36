// tilecraft CPU target: 16-lane vectors for the innermost loops that codegen/cpp_vector.py writes
// out by hand (contiguous loads and stores, float32 arithmetic, 16-bit float conversions, exp2).
//
// The contract: every function here gives, lane by lane, exactly the bits of the scalar code it
// stands for in tilecraft_cpu.h (half_t's conversions, exp2_float), NaN payloads, signed zeros,
// subnormals and infinities included; a vector loop and the scalar loop it replaces store the same
// bytes.  `+ - * /` and negation of GCC vectors are the IEEE operations of the scalar code, one lane
// each (-ffp-contract=off: nothing is fused).  Where the machine has no instruction for a step, the
// lanes run the scalar function.  tests/cpu/test_cpu_vector_loops.py checks vector loops against the scalar
// loops bit for bit, and every float16 value and float32 bit patterns of every class by hand.
//
// Why by hand: GCC 12 vectorizes no F16C / AVX-512 conversion of a scalar loop (it has no vector
// form of _Float16 conversions without AVX-512 FP16), so half_t's bit code costs ~12 instructions a
// value; and exp2_float's final 2^n scaling, two multiplications by powers of two built with
// integer operations, is one vscalefps (same bits: below).
#pragma once
#include <cstdint>
#include <cstring>

namespace tc {

constexpr int VL = 16;  // lanes of a vector loop
typedef float vf32 __attribute__((vector_size(64)));
typedef int32_t vi32 __attribute__((vector_size(64)));
typedef uint32_t vu32 __attribute__((vector_size(64)));
typedef uint16_t vu16 __attribute__((vector_size(32)));
typedef short vhi16 __attribute__((vector_size(32)));

static inline vf32 vbcast(float x) {  // every lane x, bit for bit (no arithmetic: NaN payloads kept)
  return (vf32){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
}
static inline vf32 vload(const float* p) {
  vf32 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
static inline void vstore(float* p, vf32 v) { std::memcpy(p, &v, sizeof v); }

// float16 -> float: half_t::to_float.  vcvtph2ps is exact for every value but a signaling NaN, which
// it quiets (half_t keeps the payload as it is): a group holding any NaN takes half_t's conversion.
static inline vf32 vload(const half_t* p) {
  vu16 h;
  std::memcpy(&h, p, sizeof h);
#if defined(__AVX512F__) || defined(__F16C__)
  // |h| + 0x3ff has its top bit set exactly for a NaN (|h| > 0x7c00); vptest: none set
  typedef long long v4di __attribute__((vector_size(32)));
  const vu16 top = (h & (uint16_t)0x7fff) + (uint16_t)0x3ff;
  const vu16 sign = {0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000,
                     0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000};
  if (__builtin_expect(__builtin_ia32_ptestz256((v4di)top, (v4di)sign), 1)) {
#if defined(__AVX512F__)
    return __builtin_ia32_vcvtph2ps512_mask((vhi16)h, (vf32){}, (unsigned short)0xffff, 4);
#else
    typedef short v8hi __attribute__((vector_size(16)));
    typedef float v8sf __attribute__((vector_size(32)));
    v8hi lo, hi;
    std::memcpy(&lo, p, 16);
    std::memcpy(&hi, p + 8, 16);
    const v8sf a = __builtin_ia32_vcvtph2ps256(lo), b = __builtin_ia32_vcvtph2ps256(hi);
    vf32 r;
    std::memcpy(&r, &a, 32);
    std::memcpy((char*)&r + 32, &b, 32);
    return r;
#endif
  }
#endif
  vf32 r;
  for (int l = 0; l < VL; ++l) r[l] = half_t::to_float(h[l]);
  return r;
}

// float -> float16: half_t::from_float (round to nearest even, overflow to inf, every NaN the
// canonical quiet NaN with its sign).  vcvtps2ph rounds to nearest even too (immediate 0), subnormal
// results and overflows included, but keeps the top of a NaN's payload: a group holding a NaN takes
// half_t's conversion.
static inline void vstore(half_t* p, vf32 v) {
#if defined(__AVX512F__)
  if (__builtin_expect(__builtin_ia32_cmpps512_mask(v, v, 3, (unsigned short)0xffff, 4) == 0, 1)) {  // none unordered
    const vhi16 h = __builtin_ia32_vcvtps2ph512_mask(v, 0, (vhi16){}, (unsigned short)0xffff);
    std::memcpy(p, &h, sizeof h);
    return;
  }
#elif defined(__F16C__)
  typedef long long v4di __attribute__((vector_size(32)));
  typedef short v8hi __attribute__((vector_size(16)));
  typedef float v8sf __attribute__((vector_size(32)));
  const vi32 nan = v != v;
  v4di lo, hi;
  std::memcpy(&lo, &nan, 32);
  std::memcpy(&hi, (const char*)&nan + 32, 32);
  if (__builtin_expect(__builtin_ia32_ptestz256(lo | hi, lo | hi), 1)) {
    v8sf a, b;
    std::memcpy(&a, &v, 32);
    std::memcpy(&b, (const char*)&v + 32, 32);
    const v8hi ha = __builtin_ia32_vcvtps2ph256(a, 0), hb = __builtin_ia32_vcvtps2ph256(b, 0);
    std::memcpy(p, &ha, 16);
    std::memcpy(p + 8, &hb, 16);
    return;
  }
#endif
  for (int l = 0; l < VL; ++l) p[l].bits = half_t::from_float(v[l]);
}

// bfloat16 <-> float: bfloat16_t's own integer code, 16 lanes at a time (it vectorizes as written)
static inline vf32 vload(const bfloat16_t* p) {
  vu16 h;
  std::memcpy(&h, p, sizeof h);
  return (vf32)(__builtin_convertvector(h, vu32) << 16);
}
static inline void vstore(bfloat16_t* p, vf32 v) {
  const vu32 x = (vu32)v;
  const vu32 rounded = x + 0x7fffu + ((x >> 16) & 1u);
  const vu32 r = (x & 0x7fffffffu) > 0x7f800000u ? ((x >> 16) | 0x40u) : (rounded >> 16);
  const vu16 h = __builtin_convertvector(r, vu16);
  std::memcpy(p, &h, sizeof h);
}

// exp2_float, lane by lane.  With AVX-512 the same clamps (vminps / vmaxps return their second
// operand for a NaN, as the scalar selects do), the same reduction and the same fused
// multiply-adds in the same order; then vscalefps(p, n) = p * 2^n rounded once, where the scalar
// code computes (p * 2^n1) * 2^n2 with n1 = n >> 1 >= -76: p is in [0.7, 1.42] (or NaN), so
// p * 2^n1 is a normal float, exact, and the second multiplication is the one rounding of the
// same exact product p * 2^n (a subnormal or an overflow to inf included).  NaN: n is the NaN
// itself, and vscalefps returns its first operand's NaN, which is the scalar code's.
static inline vf32 vexp2(vf32 x) {
#if defined(__AVX512F__)
  const unsigned short all = 0xffff;
  x = __builtin_ia32_minps512_mask(vbcast(129.0f), x, (vf32){}, all, 4);   // x > 129 ? 129 : x
  x = __builtin_ia32_maxps512_mask(vbcast(-151.0f), x, (vf32){}, all, 4);  // x < -151 ? -151 : x
  const vf32 magic = vbcast(12582912.0f);
  const vf32 t = x + magic;
  const vf32 n = t - magic;
  const vf32 f = x - n;
  vf32 p = vbcast(1.5303699001378845e-05f);
  p = __builtin_ia32_vfmaddps512_mask(p, f, vbcast(0.00015469729140704658f), all, 4);
  p = __builtin_ia32_vfmaddps512_mask(p, f, vbcast(0.0013333478480888061f), all, 4);
  p = __builtin_ia32_vfmaddps512_mask(p, f, vbcast(0.009618025613598036f), all, 4);
  p = __builtin_ia32_vfmaddps512_mask(p, f, vbcast(0.055504109063177154f), all, 4);
  p = __builtin_ia32_vfmaddps512_mask(p, f, vbcast(0.24022651213495422f), all, 4);
  p = __builtin_ia32_vfmaddps512_mask(p, f, vbcast(0.6931471805568341f), all, 4);
  p = __builtin_ia32_vfmaddps512_mask(p, f, vbcast(1.0f), all, 4);
  return __builtin_ia32_scalefps512_mask(p, n, (vf32){}, all, 4);
#else
  vf32 r;
  for (int l = 0; l < VL; ++l) r[l] = exp2_float(x[l]);
  return r;
#endif
}

// tc::reduce_row's float32 max and min (tilecraft_cpu.h states its order: element i into lane i % 8,
// the lanes pairwise, `init` last), 16 lanes a step.  In that order no lane ever holds a NaN (a NaN
// element yields the lane, the identity is +-inf), so the lanes fold to the largest (smallest)
// non-NaN element, or the identity: a value that does not depend on the order, and a nonzero value
// has one encoding.  Only a zero's sign depends on the order (between equal zeros max / min keep
// their second operand): a row whose result is zero takes the 8-lane loop itself.  vmaxps(x, acc)
// is `x > acc ? x : acc`: a NaN x leaves acc.
template <class R, bool MAX>
static inline float reduce_row_minmax(const float* __restrict__ p, int64_t n, float init) {
  vf32 a0 = vbcast(R::id()), a1 = a0;
  int64_t i = 0;
  for (; i + 2 * VL <= n; i += 2 * VL) {
    const vf32 x0 = vload(p + i), x1 = vload(p + i + VL);
    a0 = MAX ? (x0 > a0 ? x0 : a0) : (x0 < a0 ? x0 : a0);
    a1 = MAX ? (x1 > a1 ? x1 : a1) : (x1 < a1 ? x1 : a1);
  }
  float r = R::id();
  for (int l = 0; l < VL; ++l) {
    r = MAX ? (a0[l] > r ? a0[l] : r) : (a0[l] < r ? a0[l] : r);
    r = MAX ? (a1[l] > r ? a1[l] : r) : (a1[l] < r ? a1[l] : r);
  }
  for (; i < n; ++i) r = MAX ? (p[i] > r ? p[i] : r) : (p[i] < r ? p[i] : r);
  if (r == 0.0f) return reduce_row<R, float, false>(p, n, 1, init);
  return R::f(init, r);
}
template <> inline float reduce_row<ReduceMax, float, true>(const float* __restrict__ p, int64_t n, int64_t s, float init) {
  return s == 1 ? reduce_row_minmax<ReduceMax, true>(p, n, init) : reduce_row<ReduceMax, float, false>(p, n, s, init);
}
template <> inline float reduce_row<ReduceMin, float, true>(const float* __restrict__ p, int64_t n, int64_t s, float init) {
  return s == 1 ? reduce_row_minmax<ReduceMin, false>(p, n, init) : reduce_row<ReduceMin, float, false>(p, n, s, init);
}

// The float32 row sums.  A row's sum is a chain of n / 8 dependent additions per lane (the order is
// the semantics: tilecraft_cpu.h, reduce_row), so codegen/cpp_vector.py has the rows of a tile summed
// by one call, whose chains run four rows interleaved.  The lanes are folded in reduce_row's order
// ((0 1)(2 3))((4 5)(6 7)) and into `init` last: the same values, as addition commutes.  Where two
// NaNs meet, which one a sum returns is not a value the C++ defines (x86 returns its first operand's,
// and the compiler may swap the operands): here it is written out, as GCC 12's code for reduce_row
// chose it in the softmax kernel: a lane's first NaN, lanes 3, 2, 0, 1, then 6, 7, 5, 4, then `init`
// (a row whose lanes hold a NaN is summed again one element at a time, each lane keeping its NaN).

// a + b, or a when both are NaN (a is a sum here: a quiet NaN, as x86 returns it)
static inline float sum_nan_first(float a, float b) { return a != a ? a : a + b; }

// K rows' sums (row k at p + k * pitch, n elements) into dst[k], each folded into `init` (keep:
// into dst[k] itself); the chains of the K rows interleaved
template <int K>
static inline void sum_rows(const float* __restrict__ p, int64_t pitch, int64_t n, float* __restrict__ dst,
                            bool keep, float init) {
  typedef float vf8 __attribute__((vector_size(32)));
  vf8 acc[K], x[K];
  for (int k = 0; k < K; ++k) acc[k] = (vf8){};  // the identity, +0, in every lane
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) std::memcpy(&x[k], p + k * pitch + i, sizeof x[k]);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) acc[k] = acc[k] + x[k];
  }
  for (int k = 0; k < K; ++k) {
    float lane[8];
    std::memcpy(lane, &acc[k], sizeof lane);
    bool nan = false;
    for (int l = 0; l < 8; ++l) nan |= lane[l] != lane[l];
    if (__builtin_expect(nan, 0)) {  // a NaN sticks: no lane met one otherwise, and the additions agree
      for (int l = 0; l < 8; ++l) lane[l] = 0.0f;
      for (int64_t j = 0; j < i; ++j) lane[j % 8] = sum_nan_first(lane[j % 8], p[k * pitch + j]);
    }
    for (int64_t j = i, l = 0; j < n; ++j, ++l) lane[l] = sum_nan_first(lane[l], p[k * pitch + j]);
    const float lo = sum_nan_first(sum_nan_first(lane[3], lane[2]), sum_nan_first(lane[0], lane[1]));
    const float hi = sum_nan_first(sum_nan_first(lane[6], lane[7]), sum_nan_first(lane[5], lane[4]));
    dst[k] = sum_nan_first(sum_nan_first(lo, hi), keep ? dst[k] : init);
  }
}
template <> inline float reduce_row<ReduceSum, float, true>(const float* __restrict__ p, int64_t n, int64_t s, float init) {
  if (s != 1) return reduce_row<ReduceSum, float, false>(p, n, s, init);
  float r;
  sum_rows<1>(p, 0, n, &r, false, init);
  return r;
}

// `rows` reductions of a row-major float32 tile (row r at p + r * pitch, n elements) into dst[r],
// each tc::reduce_row's, folded into `init` (keep: into dst[r] itself)
template <class R>
static inline void reduce_rows(const float* __restrict__ p, int64_t rows, int64_t pitch, int64_t n,
                               float* __restrict__ dst, bool keep, float init) {
  for (int64_t r = 0; r < rows; ++r) dst[r] = reduce_row<R>(p + r * pitch, n, 1, keep ? dst[r] : init);
}
template <>
inline void reduce_rows<ReduceSum>(const float* __restrict__ p, int64_t rows, int64_t pitch, int64_t n,
                                   float* __restrict__ dst, bool keep, float init) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) sum_rows<4>(p + r * pitch, pitch, n, dst + r, keep, init);
  for (; r < rows; ++r) sum_rows<1>(p + r * pitch, pitch, n, dst + r, keep, init);
}

}  // namespace tc

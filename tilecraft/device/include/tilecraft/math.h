// tilecraft/math.h — type-dispatched device math, so generated code writes tc::exp(x) for any
// float/double/half/bf16 x (and tc::abs/max/min/max_value/min_value for integers too).
//
// half and bf16 have no transcendental hardware of their own worth using for accuracy: they are
// widened to float, computed, and rounded back (round-to-nearest-even), which matches what torch
// does on GPU.  Native 16-bit instructions are used only where they are exact: abs, max, min,
// isnan, isinf (HMNMX2 and bit tests, sm_80+ for bf16).
// Implementation note: inside namespace tc an unqualified exp() would find tc::exp and recurse,
// so the CUDA math library is always called with :: or its f-suffixed float name.
// NaN handling: max/min follow fmaxf/fminf (a NaN operand is ignored), not torch's propagation.
#pragma once

#include "common.h"

namespace tc {

#define TC_UNARY_FLOAT_FN(name, float_expr, double_expr)                                   \
  TC_DEVICE float name(float x) { return float_expr; }                                     \
  TC_DEVICE double name(double x) { return double_expr; }                                  \
  TC_DEVICE half_t name(half_t h) {                                                        \
    const float x = __half2float(h);                                                       \
    return __float2half_rn(float_expr);                                                    \
  }                                                                                        \
  TC_DEVICE bfloat16_t name(bfloat16_t h) {                                                \
    const float x = __bfloat162float(h);                                                   \
    return __float2bfloat16_rn(float_expr);                                                \
  }

TC_UNARY_FLOAT_FN(exp, expf(x), ::exp(x))
TC_UNARY_FLOAT_FN(exp2, exp2f(x), ::exp2(x))
TC_UNARY_FLOAT_FN(log, logf(x), ::log(x))
TC_UNARY_FLOAT_FN(log2, log2f(x), ::log2(x))
TC_UNARY_FLOAT_FN(sqrt, sqrtf(x), ::sqrt(x))
TC_UNARY_FLOAT_FN(rsqrt, rsqrtf(x), ::rsqrt(x))
TC_UNARY_FLOAT_FN(tanh, tanhf(x), ::tanh(x))
TC_UNARY_FLOAT_FN(sigmoid, 1.0f / (1.0f + expf(-x)), 1.0 / (1.0 + ::exp(-x)))
TC_UNARY_FLOAT_FN(erf, erff(x), ::erf(x))
TC_UNARY_FLOAT_FN(floor, floorf(x), ::floor(x))
TC_UNARY_FLOAT_FN(ceil, ceilf(x), ::ceil(x))
TC_UNARY_FLOAT_FN(round, rintf(x), ::rint(x))  // round half to even, like torch.round
TC_UNARY_FLOAT_FN(exp10, exp10f(x), ::exp10(x))
TC_UNARY_FLOAT_FN(log10, log10f(x), ::log10(x))
TC_UNARY_FLOAT_FN(log1p, log1pf(x), ::log1p(x))
TC_UNARY_FLOAT_FN(trunc, truncf(x), ::trunc(x))
TC_UNARY_FLOAT_FN(sin, sinf(x), ::sin(x))
TC_UNARY_FLOAT_FN(cos, cosf(x), ::cos(x))
TC_UNARY_FLOAT_FN(tan, tanf(x), ::tan(x))
TC_UNARY_FLOAT_FN(sinh, sinhf(x), ::sinh(x))
TC_UNARY_FLOAT_FN(cosh, coshf(x), ::cosh(x))
TC_UNARY_FLOAT_FN(asin, asinf(x), ::asin(x))
TC_UNARY_FLOAT_FN(acos, acosf(x), ::acos(x))
TC_UNARY_FLOAT_FN(atan, atanf(x), ::atan(x))
TC_UNARY_FLOAT_FN(asinh, asinhf(x), ::asinh(x))
TC_UNARY_FLOAT_FN(acosh, acoshf(x), ::acosh(x))
TC_UNARY_FLOAT_FN(atanh, atanhf(x), ::atanh(x))
TC_UNARY_FLOAT_FN(nearbyint, nearbyintf(x), ::nearbyint(x))
#define TC_BINARY_FLOAT_FN(name, ffn, dfn)                                                          \
  TC_DEVICE float name(float a, float b) { return ffn(a, b); }                                      \
  TC_DEVICE double name(double a, double b) { return dfn(a, b); }                                   \
  TC_DEVICE half_t name(half_t a, half_t b) {                                                       \
    return __float2half_rn(ffn(__half2float(a), __half2float(b)));                                  \
  }                                                                                                 \
  TC_DEVICE bfloat16_t name(bfloat16_t a, bfloat16_t b) {                                           \
    return __float2bfloat16_rn(ffn(__bfloat162float(a), __bfloat162float(b)));                      \
  }
TC_BINARY_FLOAT_FN(hypot, hypotf, ::hypot)
TC_BINARY_FLOAT_FN(copysign, copysignf, ::copysign)
TC_BINARY_FLOAT_FN(nextafter, nextafterf, ::nextafter)
#undef TC_BINARY_FLOAT_FN
TC_DEVICE float fma(float a, float b, float c) { return fmaf(a, b, c); }
TC_DEVICE double fma(double a, double b, double c) { return ::fma(a, b, c); }
// T.clz / T.popcount on 32- and 64-bit integers (__clz(0) is 32, __clzll(0) 64)
TC_DEVICE int clz(int x) { return __clz(x); }
TC_DEVICE int clz(unsigned x) { return __clz(static_cast<int>(x)); }
TC_DEVICE int clz(long long x) { return __clzll(x); }
TC_DEVICE int clz(unsigned long long x) { return __clzll(static_cast<long long>(x)); }
TC_DEVICE int clz(long x) { return __clzll(static_cast<long long>(x)); }
TC_DEVICE int clz(unsigned long x) { return __clzll(static_cast<long long>(x)); }
TC_DEVICE int popcount(int x) { return __popc(static_cast<unsigned>(x)); }
TC_DEVICE int popcount(unsigned x) { return __popc(x); }
TC_DEVICE int popcount(long long x) { return __popcll(static_cast<unsigned long long>(x)); }
TC_DEVICE int popcount(unsigned long long x) { return __popcll(x); }
TC_DEVICE int popcount(long x) { return __popcll(static_cast<unsigned long long>(x)); }
TC_DEVICE int popcount(unsigned long x) { return __popcll(static_cast<unsigned long long>(x)); }
TC_DEVICE float atan2(float a, float b) { return atan2f(a, b); }
TC_DEVICE double atan2(double a, double b) { return ::atan2(a, b); }
TC_DEVICE half_t atan2(half_t a, half_t b) { return __float2half_rn(atan2f(__half2float(a), __half2float(b))); }
TC_DEVICE bfloat16_t atan2(bfloat16_t a, bfloat16_t b) {
  return __float2bfloat16_rn(atan2f(__bfloat162float(a), __bfloat162float(b)));
}

// Fast approximate float forms (MUFU-based, ~2 ulp or worse), for T.__exp-style intrinsics and
// fast-math pass configs.  tanh.approx needs sm_75+.
TC_UNARY_FLOAT_FN(fast_exp, __expf(x), ::exp(x))
TC_UNARY_FLOAT_FN(fast_log, __logf(x), ::log(x))
TC_DEVICE float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));  // one MUFU.EX2, flushes denormals
  return y;
}
TC_DEVICE float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#undef TC_UNARY_FLOAT_FN

TC_DEVICE float pow(float x, float y) { return powf(x, y); }
TC_DEVICE double pow(double x, double y) { return ::pow(x, y); }
TC_DEVICE half_t pow(half_t x, half_t y) {
  return __float2half_rn(powf(__half2float(x), __half2float(y)));
}
TC_DEVICE bfloat16_t pow(bfloat16_t x, bfloat16_t y) {
  return __float2bfloat16_rn(powf(__bfloat162float(x), __bfloat162float(y)));
}

// fmod (T.fmod, and T.truncmod on floats): the remainder takes the sign of the dividend.
TC_DEVICE float fmod(float x, float y) { return fmodf(x, y); }
TC_DEVICE double fmod(double x, double y) { return ::fmod(x, y); }
TC_DEVICE half_t fmod(half_t x, half_t y) {
  return __float2half_rn(fmodf(__half2float(x), __half2float(y)));
}
TC_DEVICE bfloat16_t fmod(bfloat16_t x, bfloat16_t y) {
  return __float2bfloat16_rn(fmodf(__bfloat162float(x), __bfloat162float(y)));
}

// abs / max / min: a generic template for the integer types, exact overloads for floats.
template <class T> TC_DEVICE T abs(T x) { return is_negative(x) ? T(-x) : x; }
TC_DEVICE float abs(float x) { return fabsf(x); }
TC_DEVICE double abs(double x) { return ::fabs(x); }
TC_DEVICE half_t abs(half_t x) { return __habs(x); }
TC_DEVICE bfloat16_t abs(bfloat16_t x) { return __habs(x); }

template <class T> TC_DEVICE T max(T a, T b) { return a < b ? b : a; }
TC_DEVICE float max(float a, float b) { return fmaxf(a, b); }
TC_DEVICE double max(double a, double b) { return ::fmax(a, b); }
TC_DEVICE half_t max(half_t a, half_t b) { return __hmax(a, b); }
TC_DEVICE bfloat16_t max(bfloat16_t a, bfloat16_t b) { return __hmax(a, b); }

// max(0, x) of a 32-bit int on sm_90+ (codegen/cuda.py prints it for T.max(0, x)): ptxas 13.0 fuses
// max(0, min(x, C)) whose value is used with a later `== C` into VIMNMX.RELU and selects on its predicate
// output, which holds the opposite (found on the H200, session 25; NVRTC 13.5 is right).  Written as
// bit operations in PTX, the relu is not fused; it costs a LOP3 and a shift instead of one VIMNMX.
TC_DEVICE int relu_s32(int x) {
  int r;
  asm("{\n\t.reg .s32 t;\n\tshr.s32 t, %1, 31;\n\tnot.b32 t, t;\n\tand.b32 %0, %1, t;\n\t}" : "=r"(r) : "r"(x));
  return r;
}

template <class T> TC_DEVICE T min(T a, T b) { return b < a ? b : a; }
TC_DEVICE float min(float a, float b) { return fminf(a, b); }
TC_DEVICE double min(double a, double b) { return ::fmin(a, b); }
TC_DEVICE half_t min(half_t a, half_t b) { return __hmin(a, b); }
TC_DEVICE bfloat16_t min(bfloat16_t a, bfloat16_t b) { return __hmin(a, b); }

// isnan / isinf by bit tests (no <cmath> under NVRTC; immune to fast-math assumptions).
template <class T> TC_DEVICE bool isnan(T) { return false; }  // integers
template <class T> TC_DEVICE bool isinf(T) { return false; }
TC_DEVICE bool isnan(float x) { return (__float_as_uint(x) & 0x7fffffffu) > 0x7f800000u; }
TC_DEVICE bool isinf(float x) { return (__float_as_uint(x) & 0x7fffffffu) == 0x7f800000u; }
TC_DEVICE bool isnan(double x) {
  return (static_cast<uint64_t>(__double_as_longlong(x)) & 0x7fffffffffffffffull) >
         0x7ff0000000000000ull;
}
TC_DEVICE bool isinf(double x) {
  return (static_cast<uint64_t>(__double_as_longlong(x)) & 0x7fffffffffffffffull) ==
         0x7ff0000000000000ull;
}
TC_DEVICE bool isnan(half_t x) { return __hisnan(x); }
TC_DEVICE bool isinf(half_t x) { return __hisinf(x) != 0; }
TC_DEVICE bool isnan(bfloat16_t x) { return __hisnan(x); }
TC_DEVICE bool isinf(bfloat16_t x) { return __hisinf(x) != 0; }
template <class T> TC_DEVICE bool isfinite(T x) { return !isnan(x) && !isinf(x); }

// infinity<T>(), max_value<T>() (largest finite), min_value<T>() (lowest finite, i.e. -max for
// floats — what T.min_value means, and the identity of a max-reduction).
template <class T> TC_DEVICE T infinity();  // only floating-point types have one
template <> TC_DEVICE float infinity<float>() { return __uint_as_float(0x7f800000u); }
template <> TC_DEVICE double infinity<double>() {
  return __longlong_as_double(0x7ff0000000000000ll);
}
template <> TC_DEVICE half_t infinity<half_t>() { return __ushort_as_half(0x7c00); }
template <> TC_DEVICE bfloat16_t infinity<bfloat16_t>() { return __ushort_as_bfloat16(0x7f80); }
// nan<T>(): the canonical quiet NaN (a NaN literal in a kernel, e.g. T.float16("nan"))
template <class T> TC_DEVICE T nan();
template <> TC_DEVICE float nan<float>() { return __uint_as_float(0x7fffffffu); }
template <> TC_DEVICE double nan<double>() { return __longlong_as_double(0x7fffffffffffffffll); }
template <> TC_DEVICE half_t nan<half_t>() { return __ushort_as_half(0x7fff); }
template <> TC_DEVICE bfloat16_t nan<bfloat16_t>() { return __ushort_as_bfloat16(0x7fff); }
// 8-bit floats are built from their bits: their constructors saturate (__NV_SATFINITE), which would
// turn an infinity into the largest finite value.  float8_e4m3fn has no infinity (T.infinity refuses
// it); its NaN is S.1111.111.
template <class T> TC_DEVICE T neg_infinity();  // -inf of an 8-bit float (they have no unary minus)
#ifdef TC_FP8
template <class T> TC_DEVICE T fp8_from_bits(unsigned char bits) {
  T r;
  r.__x = bits;
  return r;
}
template <> TC_DEVICE fp8_e5m2_t infinity<fp8_e5m2_t>() { return fp8_from_bits<fp8_e5m2_t>(0x7c); }
template <> TC_DEVICE fp8_e5m2_t nan<fp8_e5m2_t>() { return fp8_from_bits<fp8_e5m2_t>(0x7f); }
template <> TC_DEVICE fp8_e4m3_t nan<fp8_e4m3_t>() { return fp8_from_bits<fp8_e4m3_t>(0x7f); }
template <> TC_DEVICE fp8_e5m2_t neg_infinity<fp8_e5m2_t>() { return fp8_from_bits<fp8_e5m2_t>(0xfc); }
#endif

template <class T> TC_DEVICE T max_value();
template <class T> TC_DEVICE T min_value();
#define TC_LIMITS(T, lo, hi)                              \
  template <> TC_DEVICE T max_value<T>() { return hi; } \
  template <> TC_DEVICE T min_value<T>() { return lo; }
TC_LIMITS(float, __uint_as_float(0xff7fffffu), __uint_as_float(0x7f7fffffu))
TC_LIMITS(double, __longlong_as_double(static_cast<int64_t>(0xffefffffffffffffull)),
          __longlong_as_double(0x7fefffffffffffffll))
TC_LIMITS(half_t, __ushort_as_half(0xfbff), __ushort_as_half(0x7bff))
TC_LIMITS(bfloat16_t, __ushort_as_bfloat16(0xff7f), __ushort_as_bfloat16(0x7f7f))
#ifdef TC_FP8
TC_LIMITS(fp8_e4m3_t, fp8_from_bits<fp8_e4m3_t>(0xfe), fp8_from_bits<fp8_e4m3_t>(0x7e))
TC_LIMITS(fp8_e5m2_t, fp8_from_bits<fp8_e5m2_t>(0xfb), fp8_from_bits<fp8_e5m2_t>(0x7b))
#endif
TC_LIMITS(bool, false, true)
TC_LIMITS(int8_t, int8_t(-128), int8_t(127))
TC_LIMITS(uint8_t, uint8_t(0), uint8_t(255))
TC_LIMITS(int16_t, int16_t(-32768), int16_t(32767))
TC_LIMITS(uint16_t, uint16_t(0), uint16_t(65535))
TC_LIMITS(int32_t, int32_t(-2147483647 - 1), int32_t(2147483647))
TC_LIMITS(uint32_t, 0u, 0xffffffffu)
TC_LIMITS(int64_t, int64_t(-9223372036854775807ll - 1), int64_t(9223372036854775807ll))
TC_LIMITS(uint64_t, 0ull, 0xffffffffffffffffull)
#undef TC_LIMITS

}  // namespace tc

// tilecraft/common.h — types, conversions and integer helpers shared by every other header.
//
// Must compile under NVRTC, which has no host C/C++ headers (<cstdint>, <cmath>, <type_traits>
// are unavailable), so the fixed-width integer types are defined here instead of included.
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#ifdef TC_FP8  // defined by generated code that uses 8-bit floats (keeps the others fast to parse)
#include <cuda_fp8.h>
#endif

// Every device helper is force-inlined: they are one or a few instructions, and a call would cost
// the ABI register shuffle plus block the compiler from scheduling across it.
#define TC_DEVICE __device__ __forceinline__
#define TC_HOST_DEVICE __host__ __device__ __forceinline__

namespace tc {

// Fixed-width integers without <cstdint> (NVRTC has none).  Generated code should spell them
// tc::int32_t etc. and must not `using namespace tc;` (under nvcc ::int32_t also exists).
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;

static_assert(sizeof(int16_t) == 2 && sizeof(int32_t) == 4 && sizeof(int64_t) == 8,
              "tilecraft assumes the LP64 CUDA data model");

// std::is_same without <type_traits> (NVRTC).
template <class A, class B> struct IsSameType { static constexpr bool value = false; };
template <class A> struct IsSameType<A, A> { static constexpr bool value = true; };

typedef __half half_t;
typedef __nv_bfloat16 bfloat16_t;
typedef __half2 half2_t;
typedef __nv_bfloat162 bfloat162_t;
#ifdef TC_FP8
// OCP 8-bit floats.  Conversions into them round to nearest even and saturate to the largest
// finite value (the __nv_fp8_* constructors' __NV_SATFINITE); the CPU target does the same.
typedef __nv_fp8_e4m3 fp8_e4m3_t;
typedef __nv_fp8_e5m2 fp8_e5m2_t;
#endif

// ---------------------------------------------------------------------------------------------
// tc::cast<To>(x): value conversion between float/double/half/bf16/integer types.
// 16-bit floats convert through float (round-to-nearest-even), except where a direct intrinsic
// exists (double->half/bf16 avoids double rounding).  float->int truncates toward zero as in C.
// ---------------------------------------------------------------------------------------------
namespace detail {
template <class To, class From>
struct Cast {
  static TC_DEVICE To run(From x) { return static_cast<To>(x); }
};
template <class From>
struct Cast<half_t, From> {
  static TC_DEVICE half_t run(From x) { return __float2half_rn(static_cast<float>(x)); }
};
template <class From>
struct Cast<bfloat16_t, From> {
  static TC_DEVICE bfloat16_t run(From x) { return __float2bfloat16_rn(static_cast<float>(x)); }
};
template <class To>
struct Cast<To, half_t> {
  static TC_DEVICE To run(half_t x) { return static_cast<To>(__half2float(x)); }
};
template <class To>
struct Cast<To, bfloat16_t> {
  static TC_DEVICE To run(bfloat16_t x) { return static_cast<To>(__bfloat162float(x)); }
};
// Full specialisations break the ambiguity between the two partial ones above.
template <> struct Cast<half_t, half_t> {
  static TC_DEVICE half_t run(half_t x) { return x; }
};
template <> struct Cast<bfloat16_t, bfloat16_t> {
  static TC_DEVICE bfloat16_t run(bfloat16_t x) { return x; }
};
template <> struct Cast<half_t, bfloat16_t> {
  static TC_DEVICE half_t run(bfloat16_t x) { return __float2half_rn(__bfloat162float(x)); }
};
template <> struct Cast<bfloat16_t, half_t> {
  static TC_DEVICE bfloat16_t run(half_t x) { return __float2bfloat16_rn(__half2float(x)); }
};
template <> struct Cast<half_t, double> {
  static TC_DEVICE half_t run(double x) { return __double2half(x); }
};
template <> struct Cast<bfloat16_t, double> {
  static TC_DEVICE bfloat16_t run(double x) { return __double2bfloat16(x); }
};
template <> struct Cast<bool, half_t> {
  static TC_DEVICE bool run(half_t x) { return __half2float(x) != 0.0f; }
};
template <> struct Cast<bool, bfloat16_t> {
  static TC_DEVICE bool run(bfloat16_t x) { return __bfloat162float(x) != 0.0f; }
};
#ifdef TC_FP8
// 8-bit floats go through float both ways (their conversion operators are explicit).
#define TC_FP8_CASTS(F8)                                                                      \
  template <class From> struct Cast<F8, From> {                                               \
    static TC_DEVICE F8 run(From x) { return F8(static_cast<float>(x)); }                     \
  };                                                                                          \
  template <class To> struct Cast<To, F8> {                                                   \
    static TC_DEVICE To run(F8 x) { return static_cast<To>(static_cast<float>(x)); }          \
  };                                                                                          \
  template <> struct Cast<F8, F8> {                                                           \
    static TC_DEVICE F8 run(F8 x) { return x; }                                               \
  };                                                                                          \
  template <> struct Cast<F8, half_t> {                                                       \
    static TC_DEVICE F8 run(half_t x) { return F8(__half2float(x)); }                         \
  };                                                                                          \
  template <> struct Cast<F8, bfloat16_t> {                                                   \
    static TC_DEVICE F8 run(bfloat16_t x) { return F8(__bfloat162float(x)); }                 \
  };                                                                                          \
  template <> struct Cast<half_t, F8> {                                                       \
    static TC_DEVICE half_t run(F8 x) { return __float2half_rn(static_cast<float>(x)); }      \
  };                                                                                          \
  template <> struct Cast<bfloat16_t, F8> {                                                   \
    static TC_DEVICE bfloat16_t run(F8 x) { return __float2bfloat16_rn(static_cast<float>(x)); } \
  };
TC_FP8_CASTS(fp8_e4m3_t)
TC_FP8_CASTS(fp8_e5m2_t)
#undef TC_FP8_CASTS
template <> struct Cast<fp8_e4m3_t, fp8_e5m2_t> {
  static TC_DEVICE fp8_e4m3_t run(fp8_e5m2_t x) { return fp8_e4m3_t(static_cast<float>(x)); }
};
template <> struct Cast<fp8_e5m2_t, fp8_e4m3_t> {
  static TC_DEVICE fp8_e5m2_t run(fp8_e4m3_t x) { return fp8_e5m2_t(static_cast<float>(x)); }
};
#endif
}  // namespace detail

template <class To, class From>
TC_DEVICE To cast(From x) {
  return detail::Cast<To, From>::run(x);
}

// T.reinterpret: the bits of `x` as a `To` of the same size (compiles to a register move).
template <class To, class From>
TC_DEVICE To bit_cast(const From& x) {
  static_assert(sizeof(To) == sizeof(From), "T.reinterpret needs types of the same width");
  To y;
  memcpy(&y, &x, sizeof(To));
  return y;
}

// ---------------------------------------------------------------------------------------------
// Integer division with Python semantics: floordiv rounds toward -inf and floormod takes the sign
// of the divisor (C's / and % truncate toward zero).  Generated index arithmetic uses these for
// T.floordiv / T.floormod; ceildiv is Python's -(-a // b).
// ---------------------------------------------------------------------------------------------
template <class T> TC_HOST_DEVICE bool is_negative(T v) { return v < T(0); }
// Unsigned overloads avoid "pointless comparison of unsigned integer with zero" warnings.
TC_HOST_DEVICE bool is_negative(unsigned char) { return false; }
TC_HOST_DEVICE bool is_negative(unsigned short) { return false; }
TC_HOST_DEVICE bool is_negative(unsigned int) { return false; }
TC_HOST_DEVICE bool is_negative(unsigned long) { return false; }
TC_HOST_DEVICE bool is_negative(unsigned long long) { return false; }

template <class A, class B>
TC_HOST_DEVICE auto floordiv(A a, B b) -> decltype(a / b) {
  typedef decltype(a / b) T;
  const T x = a, y = b;
  const T q = x / y, r = x % y;
  return (r != T(0) && (is_negative(r) != is_negative(y))) ? T(q - T(1)) : q;
}

template <class A, class B>
TC_HOST_DEVICE auto floormod(A a, B b) -> decltype(a % b) {
  typedef decltype(a % b) T;
  const T x = a, y = b;
  const T r = x % y;
  return (r != T(0) && (is_negative(r) != is_negative(y))) ? T(r + y) : r;
}

template <class A, class B>
TC_HOST_DEVICE auto ceildiv(A a, B b) -> decltype(a / b) {
  typedef decltype(a / b) T;
  const T x = a, y = b;
  const T q = x / y, r = x % y;
  return (r != T(0) && (is_negative(r) == is_negative(y))) ? T(q + T(1)) : q;
}

// ---------------------------------------------------------------------------------------------
// int4 (TileLang's T.int4): two elements a byte, the one at the even flat index in the low nibble,
// each a two's complement 4-bit integer, sign-extended when read.  A store replaces one nibble:
// s4_set in a thread's own registers, s4_set_atomic in shared or global memory, where another
// thread may store the byte's other element at the same time (atomicAnd / atomicOr on the aligned
// 32-bit word holding the byte: allocations and shared tiles are 4-byte aligned).
// ---------------------------------------------------------------------------------------------
TC_DEVICE int8_t s4_get(const int8_t* p, long long i) {
  const int b = p[i >> 1];
  return (int8_t)(((i & 1) ? b : (int)(int8_t)(b << 4)) >> 4);
}
TC_DEVICE void s4_set(int8_t* p, long long i, int v) {
  uint8_t* q = (uint8_t*)p + (i >> 1);
  const int sh = (int)(i & 1) * 4;
  *q = (uint8_t)((*q & ~(0xF << sh)) | ((v & 0xF) << sh));
}
TC_DEVICE void s4_set_atomic(int8_t* p, long long i, int v) {
  const unsigned long long a = (unsigned long long)p + (unsigned long long)(i >> 1);
  unsigned int* w = (unsigned int*)(a & ~3ull);
  const unsigned int sh = (unsigned int)((a & 3) * 8 + (i & 1) * 4);
  atomicAnd(w, ~(0xFu << sh));
  atomicOr(w, ((unsigned int)v & 0xFu) << sh);
}
// a conversion into int4: the low 4 bits, as a narrowing integer conversion wraps (a float is first
// converted to an integer, truncating toward zero)
template <class T> TC_DEVICE int8_t to_s4(T x) {
  const long long v = (long long)x;
  return (int8_t)((int8_t)((uint8_t)v << 4) >> 4);
}

// Floating-point floordiv/floormod (Python's // and % on floats).
TC_DEVICE float floordiv(float a, float b) { return floorf(a / b); }
TC_DEVICE double floordiv(double a, double b) { return ::floor(a / b); }
TC_DEVICE float floormod(float a, float b) { return a - floorf(a / b) * b; }
TC_DEVICE double floormod(double a, double b) { return a - ::floor(a / b) * b; }

}  // namespace tc

// The 16-bit float names are also visible unqualified: generated code declares buffers with them.
using tc::half_t;
using tc::bfloat16_t;
#ifdef TC_FP8
using tc::fp8_e4m3_t;
using tc::fp8_e5m2_t;
#endif

// tilecraft/print.h — device-side printing for T.print.
//
// Output format (one line per call, as TileLang prints):
//   msg='<msg>' BlockIdx=(x, y, z), ThreadIdx=(x, y, z): dtype=<type> value=<v>
// printf in a kernel writes to a fixed-size FIFO (1 MiB by default) that the host drains at the
// next synchronisation point, so output appears late and may be truncated for large tiles.
// half/bf16 are printed through float (printf has no 16-bit float conversion).
#pragma once

#include "common.h"

namespace tc {

#define TC_PRINT_FMT_HEAD "msg='%s' BlockIdx=(%d, %d, %d), ThreadIdx=(%d, %d, %d): dtype=%s value="
#define TC_PRINT_IDS                                                                    \
  (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x, (int)threadIdx.y, \
      (int)threadIdx.z
#define TC_PRINT_OVERLOAD(T, dtype, conv, expr)                                   \
  TC_DEVICE void print(const char* msg, T value) {                               \
    printf(TC_PRINT_FMT_HEAD conv "\n", msg, TC_PRINT_IDS, dtype, expr);         \
  }                                                                               \
  TC_DEVICE void print(const char* msg, const char* buffer, long long index, T value) { \
    printf("msg='%s' BlockIdx=(%d, %d, %d), ThreadIdx=(%d, %d, %d): buffer=%s, index=%lld, " \
           "dtype=%s value=" conv "\n",                                           \
           msg, TC_PRINT_IDS, buffer, index, dtype, expr);                        \
  }

TC_PRINT_OVERLOAD(float, "float32", "%f", (double)value)
TC_PRINT_OVERLOAD(double, "float64", "%lf", value)
TC_PRINT_OVERLOAD(half_t, "float16", "%f", (double)__half2float(value))
TC_PRINT_OVERLOAD(bfloat16_t, "bfloat16", "%f", (double)__bfloat162float(value))
TC_PRINT_OVERLOAD(bool, "bool", "%s", value ? "True" : "False")
TC_PRINT_OVERLOAD(signed char, "int8", "%d", (int)value)
TC_PRINT_OVERLOAD(unsigned char, "uint8", "%u", (unsigned)value)
TC_PRINT_OVERLOAD(short, "int16", "%d", (int)value)
TC_PRINT_OVERLOAD(unsigned short, "uint16", "%u", (unsigned)value)
TC_PRINT_OVERLOAD(int, "int32", "%d", value)
TC_PRINT_OVERLOAD(unsigned int, "uint32", "%u", value)
TC_PRINT_OVERLOAD(long long, "int64", "%lld", value)
TC_PRINT_OVERLOAD(unsigned long long, "uint64", "%llu", value)

#undef TC_PRINT_OVERLOAD
#undef TC_PRINT_IDS
#undef TC_PRINT_FMT_HEAD

// A message alone (T.print("...") without a value).
TC_DEVICE void print(const char* msg) {
  printf("msg='%s' BlockIdx=(%d, %d, %d), ThreadIdx=(%d, %d, %d)\n", msg, (int)blockIdx.x,
         (int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x, (int)threadIdx.y, (int)threadIdx.z);
}

// T.device_assert(cond, msg) (and `assert` on kernel values): when cond is false, print the message
// (it names the program's file and line) with this thread's indices and stop the kernel with a trap;
// the launch then fails, and the CUDA context with it, as with CUDA's own assert.
TC_DEVICE void device_assert(bool ok, const char* where) {
  if (!ok) {
    printf("tilecraft: device %s [BlockIdx=(%d, %d, %d), ThreadIdx=(%d, %d, %d)]\n", where,
           (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x, (int)threadIdx.y, (int)threadIdx.z);
    __trap();
  }
}

}  // namespace tc

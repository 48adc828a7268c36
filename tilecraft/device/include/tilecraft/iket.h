// tilecraft/iket.h — in-kernel trace events on the CUDA target (tilelang.tools.cuda.iket;
// language/iket.py has the meaning, runtime/iket.py the host side).  Parsed only by kernels that
// record events (generated code defines TC_IKET).
//
// As TileLang's IKET does, an event is recorded per warp: the lowest active lane of the warp that
// executes `iket.mark` / a range's begin or end writes one row (its payload is that lane's value).
// A row is 8 x 64-bit, appended to the log the launcher allocates and points `tc_iket_log` at
// (runtime/iket.py reads it back after the launch):
//   [0] event id | kind << 32 (0 mark, 1 range begin, 2 range end) | payload kind << 40
//       (0 none, 1 integer, 2 double's bits)
//   [1..3] blockIdx.x, y, z     [4] %globaltimer (ns)     [5] clock64() (cycles of the warp's SM)
//   [6] payload                 [7] warp | lane << 16 | active lanes << 24 | %smid << 32
// Rows past the capacity are counted, not written: the host reports them as dropped.
#pragma once

#include "common.h"

#ifdef TC_IKET
// global namespace, so the module exports it unmangled (cuModuleGetGlobal "tc_iket_log")
struct TcIketLog {
  unsigned long long* rows;
  unsigned long long capacity;  // in rows
  unsigned long long count;     // rows asked for (reset by the launcher before each launch)
};
__device__ TcIketLog tc_iket_log;

namespace tc {

TC_DEVICE void iket_event(unsigned id, unsigned kind, unsigned payload_kind, long long payload) {
  const unsigned active = __activemask();
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  if (lane != (unsigned)(__ffs(active) - 1)) return;  // one row per warp: its lowest active lane
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  const long long cycles = clock64();
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  const unsigned tid = threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
  const unsigned long long slot = atomicAdd(&tc_iket_log.count, 1ull);
  if (slot >= tc_iket_log.capacity) return;
  unsigned long long* r = tc_iket_log.rows + slot * 8;
  r[0] = (unsigned long long)id | ((unsigned long long)kind << 32) | ((unsigned long long)payload_kind << 40);
  r[1] = blockIdx.x;
  r[2] = blockIdx.y;
  r[3] = blockIdx.z;
  r[4] = t;
  r[5] = (unsigned long long)cycles;
  r[6] = (unsigned long long)payload;
  r[7] = (unsigned long long)(tid / 32) | ((unsigned long long)lane << 16) |
         ((unsigned long long)__popc(active) << 24) | ((unsigned long long)sm << 32);
}

TC_DEVICE long long iket_f64_bits(double v) { return __double_as_longlong(v); }

}  // namespace tc

// the event calls generated code makes (TileLang's generated CUDA names them TL_IKET_EVENT*)
#define TL_IKET_EVENT(kind, id) tc::iket_event((id), (kind), 0u, 0ll)
#define TL_IKET_EVENT_PAYLOAD_INT(kind, id, value) tc::iket_event((id), (kind), 1u, (long long)(value))
#define TL_IKET_EVENT_PAYLOAD_FLOAT(kind, id, value) \
  tc::iket_event((id), (kind), 2u, tc::iket_f64_bits((double)(value)))
#endif  // TC_IKET

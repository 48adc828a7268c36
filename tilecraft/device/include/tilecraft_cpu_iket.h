// tilecraft CPU target: the log of in-kernel trace events (tilelang.tools.cuda.iket; language/iket.py).
// Included by kernels that record events.  Each event is one row of 8 int64 values:
//   event id, kind (0 mark, 1 range begin, 2 range end), block x, y, z, timestamp (ns of the
//   monotonic steady_clock), payload (its bits), payload kind (0 none, 1 integer, 2 double's bits).
// Rows are appended under a lock, the timestamp taken inside it: the log's order is the time order.
// The runtime drains the log after each launch (runtime/iket.py: tc_iket_count, tc_iket_drain).
#pragma once
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

namespace tc {
struct IketLog {
  std::mutex mu;
  std::vector<int64_t> rows;
};
static inline IketLog& iket_log() { static IketLog log; return log; }
static inline int64_t iket_f64_bits(double v) { int64_t b; std::memcpy(&b, &v, sizeof b); return b; }
static inline void iket_event(int64_t id, int64_t kind, int64_t bx, int64_t by, int64_t bz, int64_t payload,
                              int64_t payload_kind) {
  IketLog& log = iket_log();
  std::lock_guard<std::mutex> guard(log.mu);
  const int64_t t = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch()).count();
  log.rows.insert(log.rows.end(), {id, kind, bx, by, bz, t, payload, payload_kind});
}
}  // namespace tc

extern "C" {
// the number of int64 values in the log (8 per event)
__attribute__((visibility("default"))) int64_t tc_iket_count() {
  tc::IketLog& log = tc::iket_log();
  std::lock_guard<std::mutex> guard(log.mu);
  return (int64_t)log.rows.size();
}
// copy up to `cap` values of the log into `out` and empty it; the number copied
__attribute__((visibility("default"))) int64_t tc_iket_drain(int64_t* out, int64_t cap) {
  tc::IketLog& log = tc::iket_log();
  std::lock_guard<std::mutex> guard(log.mu);
  const int64_t n = (int64_t)log.rows.size() < cap ? (int64_t)log.rows.size() : cap;
  if (n > 0) std::memcpy(out, log.rows.data(), (size_t)n * sizeof(int64_t));
  log.rows.clear();
  return n;
}
}

// tilecraft CPU target, thread-level mode: a block's CUDA threads emulated as fibers.
//
// A kernel that uses thread-level constructs (thread indices, warp shuffles and reductions, named
// barriers, mbarriers that warp groups wait on concurrently; transform/cpu_threads.py) is lowered
// by the CUDA passes to per-thread code, and each block runs it once per thread: one fiber (its own
// stack, a hand-written context switch) per CUDA thread, all of a block's fibers on the OpenMP
// thread that runs the block.  A fiber runs until it must wait -- a block or named barrier, a warp
// exchange (shuffles, warp reductions, __syncwarp: every lane of the warp must arrive), an mbarrier
// phase that has not completed -- and then yields to the block's scheduler, which resumes, in
// thread order, every fiber whose wait is over.  When no live fiber can go on, the block is
// deadlocked: the kernel stops with a message naming each wait (what, which threads, the line),
// never a hang.  Included after tilecraft_cpu.h (its types, math, atomics, asserts).
//
// A thread-block cluster whose blocks arrive on each other's mbarriers (T.mbarrier_arrive(bar,
// cta_id)) runs as one pool: `ctas` blocks of `per` fibers each, fiber t being thread t % per of
// the cluster's block t / per (its rank).  Each block keeps its own barriers, warps and thread
// count; a wait in one block ends on another's arrival because one scheduler runs them all, and a
// deadlock is one of the whole cluster.  A pool of one block is the ordinary case.
#pragma once
#include <sys/mman.h>
#include <time.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "the CPU target's thread-level mode needs x86-64 or AArch64 (tilecraft_cpu_threads.h: the fiber switch)"
#endif

// tc_simt_switch(save, to): store this fiber's stack pointer in *save, continue on stack `to`.
// Only the callee-saved registers are kept (the call is an ordinary function call to the compiler);
// the floating-point control state is the block's, shared by its fibers (none of them changes it).
extern "C" void tc_simt_switch(void** save, void* to);
#if defined(__x86_64__)
__asm__(
    ".text\n.p2align 4\n.globl tc_simt_switch\n.hidden tc_simt_switch\n.type tc_simt_switch,@function\n"
    "tc_simt_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n.size tc_simt_switch,.-tc_simt_switch\n");
#else
__asm__(
    ".text\n.p2align 4\n.globl tc_simt_switch\n.hidden tc_simt_switch\n.type tc_simt_switch,%function\n"
    "tc_simt_switch:\n"
    "  sub sp, sp, #176\n"
    "  stp x19, x20, [sp, #0]\n  stp x21, x22, [sp, #16]\n  stp x23, x24, [sp, #32]\n"
    "  stp x25, x26, [sp, #48]\n  stp x27, x28, [sp, #64]\n  stp x29, x30, [sp, #80]\n"
    "  stp d8, d9, [sp, #96]\n  stp d10, d11, [sp, #112]\n  stp d12, d13, [sp, #128]\n  stp d14, d15, [sp, #144]\n"
    "  mov x9, sp\n  str x9, [x0]\n  mov sp, x1\n"
    "  ldp x19, x20, [sp, #0]\n  ldp x21, x22, [sp, #16]\n  ldp x23, x24, [sp, #32]\n"
    "  ldp x25, x26, [sp, #48]\n  ldp x27, x28, [sp, #64]\n  ldp x29, x30, [sp, #80]\n"
    "  ldp d8, d9, [sp, #96]\n  ldp d10, d11, [sp, #112]\n  ldp d12, d13, [sp, #128]\n  ldp d14, d15, [sp, #144]\n"
    "  add sp, sp, #176\n  ret\n.size tc_simt_switch,.-tc_simt_switch\n");
#endif

namespace tc {
// the CUDA emitters spell the fixed-width integers as tc::int8_t and co. (NVRTC has no <cstdint>)
using ::int8_t; using ::int16_t; using ::int64_t; using ::uint8_t; using ::uint16_t; using ::uint32_t;
using ::uint64_t;

namespace simt {

// A growable C string (the deadlock and failure texts), not std::string: <string> and <chrono> were
// ~0.15 of ~0.17 CPU-s of every thread-level kernel's compile before its own code.
struct Text {
  char* p = nullptr;
  size_t len = 0, cap = 0;
  Text() = default;
  Text(const Text&) = delete;
  Text& operator=(const Text&) = delete;
  ~Text() { std::free(p); }
  void clear() {
    len = 0;
    if (p) p[0] = 0;
  }
  Text& operator+=(const char* s) {
    const size_t k = std::strlen(s);
    if (len + k + 1 > cap) {
      size_t c = cap ? cap : 256;
      while (c < len + k + 1) c *= 2;
      char* q = (char*)std::realloc(p, c);
      if (q == nullptr) return *this;  // out of memory: the text stays as it was
      p = q;
      cap = c;
    }
    std::memcpy(p + len, s, k + 1);
    len += k;
    return *this;
  }
  Text& operator=(const char* s) {
    clear();
    return *this += s;
  }
  const char* c_str() const { return p ? p : ""; }
};

// seconds on the monotonic clock (std::chrono::steady_clock's)
static inline double monotonic_seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum Wait : int { RUNNING = 0, BARRIER, WARP, MBARRIER, POLL, DONE };

// a block whose live fibers only spin in `while` loops on memory (poll) for this long, with no barrier,
// warp exchange, mbarrier arrival or exit among them, is deadlocked too
static constexpr double SPIN_SECONDS = 8.0;

}  // namespace simt
}  // namespace tc

// SPIN_SECONDS unless the runtime sets another limit when it loads the library (runtime/openmp.py:
// TILECRAFT_CPU_SPIN_SECONDS; the deadlock test sets a short one)
extern "C" {
__attribute__((visibility("default"))) double tc_simt_spin_seconds = tc::simt::SPIN_SECONDS;
}

namespace tc {
namespace simt {

struct Fiber {
  void* sp;
  int wait;            // Wait
  const void* obj;     // the barrier / warp / mbarrier waited on
  uint64_t value;      // the generation (barriers, warps) or parity (mbarriers) waited for
  const char* site;    // "file.py:12 (source line)" of the wait
  int bar_id, bar_count;
  const char* spin;    // inside a `while` loop on memory: its site (poll), else nullptr
};

struct Barrier { int arrived; uint64_t gen; };

struct Warp {
  int arrived, size;
  uint64_t gen;
  uint64_t slot[2][32];  // the lanes' values of the last two exchanges (by generation parity)
};

struct Block;
static thread_local Block* g_block = nullptr;

static constexpr int NAMED_BARRIERS = 16;   // per block (bar.sync ids 0..15)

struct Block {
  int n = 0, live = 0, cur = 0;
  int ctas = 1, per = 0, wpc = 0;   // blocks in the pool, threads per block, warps per block
  void* sched_sp = nullptr;
  Fiber* f = nullptr;
  Warp* warps = nullptr;
  Barrier* bars = nullptr;          // NAMED_BARRIERS per block, then the cluster's barrier
  int* lives = nullptr;             // live threads per block
  char* stacks = nullptr;
  size_t stack_bytes = 0, mapped = 0;
  void (*fn)(void*) = nullptr;
  void* ctx = nullptr;
  const char* assert_where = nullptr;
  Text error;
  // progress: barriers, warp exchanges and mbarrier arrivals completed outside `while` loops on
  // memory, such loops ended, fibers exited
  uint64_t events = 0;
  void event() { if (f[cur].spin == nullptr) ++events; }

  Block(int threads, size_t stack, int blocks = 1) : n(threads * blocks), ctas(blocks), per(threads) {
    stack_bytes = (stack + 4095) & ~(size_t)4095;
    wpc = (per + 31) / 32;
    f = new Fiber[n];
    warps = new Warp[wpc * ctas];
    bars = new Barrier[NAMED_BARRIERS * ctas + 1];
    lives = new int[ctas];
    mapped = (stack_bytes + 4096) * (size_t)n;
    void* m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    stacks = m == MAP_FAILED ? nullptr : (char*)m;
    // a guard page below each stack: an overflow faults instead of overwriting a neighbour
    for (int t = 0; stacks && t < n; ++t) mprotect(stacks + (stack_bytes + 4096) * (size_t)t, 4096, PROT_NONE);
  }
  ~Block() {
    if (stacks) munmap(stacks, mapped);
    delete[] f;
    delete[] warps;
    delete[] bars;
    delete[] lives;
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  bool ready(const Fiber& x) const {
    switch (x.wait) {
      case RUNNING: return true;
      case BARRIER: return ((const Barrier*)x.obj)->gen != x.value;
      case WARP: return ((const Warp*)x.obj)->gen != x.value;
      case MBARRIER: return (int)((*(const uint64_t*)x.obj >> 40) & 1) != (int)x.value;
      case POLL: return true;
      default: return false;
    }
  }

  static void entry();
  void describe_deadlock();

  // Runs one block: fn(ctx) once per thread.  0 on success; -1 a false T.device_assert
  // (assert_where); -2 a deadlock or another failure (error).
  int run(void (*body)(void*), void* arg) {
    if (!stacks) { error = "could not map the fibers' stacks"; return -2; }
    fn = body; ctx = arg; assert_where = nullptr; error.clear();
    for (int i = 0; i <= NAMED_BARRIERS * ctas; ++i) bars[i] = Barrier{0, 0};
    for (int c = 0; c < ctas; ++c) {
      lives[c] = per;
      for (int w = 0; w < wpc; ++w) {
        Warp& x = warps[c * wpc + w];
        x.arrived = 0; x.gen = 0;
        x.size = per - 32 * w < 32 ? per - 32 * w : 32;
      }
    }
    for (int t = 0; t < n; ++t) {
      // tops staggered by a few cache lines: equal offsets within a page would put every fiber's
      // hot frames in the same cache sets
      char* top = stacks + (stack_bytes + 4096) * (size_t)(t + 1) - 64 * (size_t)(t % 61);
      void** sp = (void**)top;
#if defined(__x86_64__)
      *--sp = nullptr;                  // entry's return address (it never returns)
      *--sp = (void*)&Block::entry;     // where tc_simt_switch's ret goes
      for (int i = 0; i < 6; ++i) *--sp = nullptr;
#else
      sp -= 22;
      for (int i = 0; i < 22; ++i) sp[i] = nullptr;
      sp[11] = (void*)&Block::entry;     // x30: where ret goes
#endif
      f[t] = Fiber{sp, RUNNING, nullptr, 0, nullptr, 0, 0, nullptr};
    }
    live = n;
    Block* outer = g_block;
    g_block = this;
    int rc = 0;
    uint64_t idle_rounds = 0;
    double idle_since = 0;
    for (;;) {
      bool progress = false, alive = false, spinning = false;
      const uint64_t before = events;
      for (int t = 0; t < n; ++t) {
        Fiber& x = f[t];
        if (x.wait == DONE) continue;
        alive = true;
        if (!ready(x)) continue;
        x.wait = RUNNING;
        cur = t;
        tc_simt_switch(&sched_sp, x.sp);
        progress = true;
        if (assert_where != nullptr) { rc = -1; break; }
      }
      if (rc || !alive) break;
      if (!progress) { describe_deadlock(); rc = -2; break; }
      // every live fiber spins in a `while` loop on memory or waits, and nothing else happens
      for (int t = 0; t < n && !spinning; ++t) spinning = f[t].wait != DONE && f[t].spin != nullptr;
      if (spinning && events == before) {
        if (idle_rounds++ == 0) idle_since = monotonic_seconds();
        if ((idle_rounds & 1023) == 0 &&
            monotonic_seconds() - idle_since > tc_simt_spin_seconds) {
          describe_deadlock();
          rc = -2;
          break;
        }
      } else {
        idle_rounds = 0;
      }
    }
    g_block = outer;
    return rc;
  }

  // the running fiber waits (`kind` on `obj` for `value`) and gives the OS thread back
  void block_on(int kind, const void* obj, uint64_t value, const char* site, int bar_id = 0, int count = 0) {
    Fiber& x = f[cur];
    x.wait = kind; x.obj = obj; x.value = value; x.site = site; x.bar_id = bar_id; x.bar_count = count;
    tc_simt_switch(&x.sp, sched_sp);
  }

  // the running fiber's block (its rank in the pool's cluster), its thread index, warp and barriers
  int cta() const { return cur / per; }
  Warp& warp() { return warps[cta() * wpc + cur % per / 32]; }
  Barrier* block_bars(int c) { return bars + NAMED_BARRIERS * c; }
  Barrier& cluster_bar() { return bars[NAMED_BARRIERS * ctas]; }

  // a fiber's end: __syncthreads (and a cluster barrier) no longer waits for it
  void exited() {
    const int c = cta();
    --live;
    --lives[c];
    ++events;
    f[cur].spin = nullptr;
    Barrier& b = block_bars(c)[0];
    if (b.arrived > 0 && b.arrived >= lives[c]) { b.arrived = 0; ++b.gen; }
    Barrier& cb = cluster_bar();
    if (cb.arrived > 0 && cb.arrived >= live) { cb.arrived = 0; ++cb.gen; }
  }
};

inline void Block::entry() {
  Block* b = g_block;
  try {
    b->fn(b->ctx);
  } catch (const AssertFailed& e) {
    b->assert_where = e.where;
  }
  b->f[b->cur].wait = DONE;
  b->exited();
  void* dead;
  tc_simt_switch(&dead, b->sched_sp);
  __builtin_unreachable();
}

inline void Block::describe_deadlock() {
  Text out;
  out = ctas == 1 ? "deadlock: every live thread of the block waits, and no wait can end:"
                               : "deadlock: every live thread of the cluster's blocks waits, and no wait can end:";
  // a fiber in a spin loop whose wait inside it is over is spinning too
  for (int i = 0; i < n; ++i)
    if (f[i].wait != DONE && f[i].wait != POLL && f[i].spin != nullptr && ready(f[i])) {
      f[i].wait = POLL; f[i].site = f[i].spin; f[i].obj = nullptr; f[i].value = 0;
    }
  int t = 0, shown = -1;
  while (t < n) {
    const Fiber& x = f[t];
    if (x.wait == DONE) { ++t; continue; }
    int u = t + 1;
    while (u < n && u / per == t / per && f[u].wait == x.wait && f[u].obj == x.obj && f[u].site == x.site &&
           f[u].value == x.value && f[u].spin == x.spin) ++u;
    char buf[512];
    if (ctas > 1 && t / per != shown) {  // thread numbers are within their block: say which block
      shown = t / per;
      std::snprintf(buf, sizeof buf, "\n  in the cluster's block of rank %d:", shown);
      out += buf;
    }
    const int c = t / per, t0 = t % per, t1 = (u - 1) % per;
    const char* where = x.site ? x.site : "?";
    if (x.wait == POLL) {
      std::snprintf(buf, sizeof buf, "\n  threads %d-%d spin in the while loop at %s, and for %g s no thread did "
                    "anything but spin or wait", t0, t1, where, tc_simt_spin_seconds);
    } else if (x.wait == BARRIER && x.bar_id == 0 && x.obj != &cluster_bar()) {
      std::snprintf(buf, sizeof buf, "\n  threads %d-%d wait at the block barrier (__syncthreads) at %s: %d of the %d "
                    "live threads arrived", t0, t1, where, block_bars(c)[0].arrived, lives[c]);
    } else if (x.wait == BARRIER && x.obj != &cluster_bar()) {
      std::snprintf(buf, sizeof buf, "\n  threads %d-%d wait at named barrier %d (%d threads) at %s: %d arrived",
                    t0, t1, x.bar_id, x.bar_count, where, ((const Barrier*)x.obj)->arrived);
    } else if (x.wait == WARP) {
      const Warp* w = (const Warp*)x.obj;
      std::snprintf(buf, sizeof buf, "\n  threads %d-%d (warp %d) wait for the rest of their warp at %s (a shuffle, warp "
                    "reduction or __syncwarp needs all %d lanes): %d lanes arrived", t0, t1, (int)(w - warps) % wpc,
                    where, w->size, w->arrived);
    } else if (x.wait == BARRIER) {
      std::snprintf(buf, sizeof buf, "\n  threads %d-%d wait at the cluster barrier at %s: %d of the cluster's %d "
                    "live threads arrived", t0, t1, where, cluster_bar().arrived, live);
    } else {
      const uint64_t word = *(const uint64_t*)x.obj;
      std::snprintf(buf, sizeof buf, "\n  threads %d-%d wait on an mbarrier for its phase of parity %d at %s: "
                    "%llu phases completed, the running one has %llu of %llu arrivals", t0, t1,
                    (int)x.value, where, (unsigned long long)(word >> 40),
                    (unsigned long long)((word >> 20) & 0xFFFFF), (unsigned long long)(word & 0xFFFFF));
    }
    out += buf;
    if (x.spin != nullptr && x.wait != POLL) {
      std::snprintf(buf, sizeof buf, " (inside the while loop at %s)", x.spin);
      out += buf;
    }
    t = u;
  }
  error = out.c_str();
}

inline int tid() { return g_block->cur % g_block->per; }
inline int cta() { return g_block->cta(); }

// this OS thread's block of `threads` fibers (a cluster's `blocks` blocks of `threads` fibers each)
// with stacks of at least `stack` bytes, kept between
// kernel calls (mapping and guarding the stacks again would cost more than a small kernel does);
// nullptr when the memory for it cannot be had (the caller reports it: codegen/cpp_threads.py) --
// never an exception out of the OpenMP region, which would end the process
inline Block* block(int threads, size_t stack, int blocks = 1) {
  static thread_local Block* cached = nullptr;
  if (cached == nullptr || cached->per != threads || cached->ctas != blocks || cached->stack_bytes < stack) {
    delete cached;
    try {
      cached = new Block(threads, stack, blocks);
    } catch (const std::bad_alloc&) {
      cached = nullptr;
    }
    if (cached != nullptr && cached->stacks == nullptr) {
      delete cached;
      cached = nullptr;
    }
  }
  return cached;
}

// ---- barriers -------------------------------------------------------------------------------------
inline void barrier(int id, int count, const char* site) {  // count 0: every live thread (__syncthreads)
  Block& b = *g_block;
  Barrier& br = b.block_bars(b.cta())[id];
  const int expect = count ? count : b.lives[b.cta()];
  if (++br.arrived >= expect) { br.arrived = 0; ++br.gen; b.event(); return; }
  b.block_on(BARRIER, &br, br.gen, site, id, count);
}
inline void sync_threads(const char* site) { barrier(0, 0, site); }
// every live thread of every block of the pool's cluster (tc::cluster_sync on the GPU)
inline void cluster_sync(const char* site) {
  Block& b = *g_block;
  Barrier& br = b.cluster_bar();
  if (++br.arrived >= b.live) { br.arrived = 0; ++br.gen; b.event(); return; }
  b.block_on(BARRIER, &br, br.gen, site, 0, 0);
}

// every lane of this thread's warp deposits `bits`; returns the warp's deposits once all arrived
inline const uint64_t* warp_exchange(uint64_t bits, const char* site) {
  Block& b = *g_block;
  Warp& w = b.warp();
  const int par = (int)(w.gen & 1);
  w.slot[par][b.cur % b.per % 32] = bits;
  if (++w.arrived == w.size) { w.arrived = 0; ++w.gen; b.event(); }
  else b.block_on(WARP, &w, w.gen, site);
  return w.slot[par];
}
inline void sync_warp(const char* site) { warp_exchange(0, site); }

// an iteration of a `while` loop whose condition reads memory: other threads run (CUDA's threads
// would be running meanwhile), so a loop that waits for another thread's store ends
inline void poll(const char* site) {
  g_block->f[g_block->cur].spin = site;
  g_block->block_on(POLL, nullptr, 0, site);
}
inline void poll_end() {  // after the loop
  Block& b = *g_block;
  if (b.f[b.cur].spin != nullptr) { b.f[b.cur].spin = nullptr; ++b.events; }
}

template <class T> inline uint64_t to_bits(T v) { uint64_t u = 0; std::memcpy(&u, &v, sizeof(T)); return u; }
template <class T> inline T from_bits(uint64_t u) { T v; std::memcpy(&v, &u, sizeof(T)); return v; }

// `src(lane)`: the lane whose value this lane receives (its own where the shuffle leaves the group)
template <class T, class Src> inline T shuffle(T v, const char* site, Src src) {
  const uint64_t* all = warp_exchange(to_bits(v), site);
  return from_bits<T>(all[src(tid() % 32)]);
}
template <class T> inline T shfl_xor(T v, int mask, int width, const char* site) {
  return shuffle(v, site, [&](int l) { int s = l ^ mask; return s < (l / width + 1) * width ? s : l; });
}
template <class T> inline T shfl_down(T v, int delta, int width, const char* site) {
  return shuffle(v, site, [&](int l) { return l % width + delta < width ? l + delta : l; });
}
template <class T> inline T shfl_up(T v, int delta, int width, const char* site) {
  return shuffle(v, site, [&](int l) { return l % width >= delta ? l - delta : l; });
}
template <class T> inline T shfl_idx(T v, int src, int width, const char* site) {
  return shuffle(v, site, [&](int l) { return l / width * width + ((src % width) + width) % width; });
}

// the butterflies of tc::shfl_xor_reduce, computed for every lane from one exchange: each step
// v = op(v, lane ^ mask's v), in the GPU's order, so the results are the GPU's
template <class Op, int... Masks, class T> inline T shfl_xor_reduce(T v, const char* site) {
  const uint64_t* all = warp_exchange(to_bits(v), site);
  const int size = g_block->warp().size;
  T vals[32], next[32];
  for (int l = 0; l < size; ++l) vals[l] = from_bits<T>(all[l]);
  const Op op;
  for (int m : {Masks...}) {
    for (int l = 0; l < size; ++l) next[l] = (l ^ m) < size ? (T)op(vals[l], vals[l ^ m]) : vals[l];
    for (int l = 0; l < size; ++l) vals[l] = next[l];
  }
  return vals[tid() % 32];
}

// ---- the kernel's failure: the first failing block's (entry's return value, tc_error_text) --------
inline int& failure_code() { static int code = 0; return code; }
inline Text& failure_string() { static Text text; return text; }
inline const char* failure_text() { return failure_string().c_str(); }
inline void reset() { failure_code() = 0; failure_string().clear(); }
inline bool failed() { return __atomic_load_n(&failure_code(), __ATOMIC_RELAXED) != 0; }
// a failure outside any block (an allocation for this OpenMP thread's blocks, codegen/cpp_threads.py):
// the entry returns -2 and tc_error_text says `text`
inline void fail(const char* text) {
#pragma omp critical(tc_simt_failure)
  {
    if (failure_code() == 0) {
      failure_string() = text;
      __atomic_store_n(&failure_code(), -2, __ATOMIC_RELAXED);
    }
  }
}
inline void record(int rc, const Block& b, int bx, int by, int bz) {
#pragma omp critical(tc_simt_failure)
  {
    if (failure_code() == 0) {
      if (rc == -1) {
        cpu_assert_record(b.assert_where);
      } else {
        char where[96];
        std::snprintf(where, sizeof where, b.ctas == 1 ? "block (%d, %d, %d): " : "the cluster of block (%d, %d, %d): ",
                      bx, by, bz);
        failure_string() = where;
        failure_string() += b.error.c_str();
      }
      __atomic_store_n(&failure_code(), rc, __ATOMIC_RELAXED);
    }
  }
}

// ---- mbarriers (the word's layout: tilecraft_cpu.h, cpu_mbar_*) ------------------------------------
inline void mbar_wait_parity(uint64_t* bar, int parity, const char* site) {
  if ((int)((*bar >> 40) & 1) != (parity & 1)) return;  // that phase has completed
  g_block->block_on(MBARRIER, bar, (uint64_t)(parity & 1), site);
}

}  // namespace simt

inline void mbar_init(uint64_t* bar, int count) { cpu_mbar_init(bar, count); }
inline void mbar_arrive(uint64_t* bar) {
  cpu_mbar_arrive(bar, 1);
  simt::g_block->event();
}
// a remote arrival: on the mbarrier at `bar`'s offset in block `cta` of the pool's cluster, whose
// shared memories lie `stride` bytes apart (codegen/cpp_threads.py); a rank outside the cluster is
// the program's error `bad` (file:line and what), raised as a false assertion is
inline void mbar_arrive_cluster(uint64_t* bar, int cta, long stride, const char* bad) {
  simt::Block& b = *simt::g_block;
  if (cta < 0 || cta >= b.ctas) throw AssertFailed{bad};
  cpu_mbar_arrive((uint64_t*)((char*)bar + (long)(cta - b.cta()) * stride), 1);
  b.event();
}

struct SumOp { template <class T> T operator()(T a, T b) const { return a + b; } };
struct MaxOp { template <class T> T operator()(T a, T b) const { return tc::max(a, b); } };
struct MinOp { template <class T> T operator()(T a, T b) const { return tc::min(a, b); } };
struct BitAndOp { template <class T> T operator()(T a, T b) const { return a & b; } };
struct BitOrOp { template <class T> T operator()(T a, T b) const { return a | b; } };
struct BitXorOp { template <class T> T operator()(T a, T b) const { return a ^ b; } };

// ---- the sm80 shared-memory swizzle (tilecraft/gemm_sm80.h's, for tiles a layout annotation swizzles) --
namespace detail {
template <int L, int ELEM_BYTES> struct SwizzleGroup {
  static_assert(16 % ELEM_BYTES == 0 && (L * ELEM_BYTES) % 16 == 0, "swizzle: 16-byte chunks");
  static constexpr int C = L * ELEM_BYTES / 16;
  static constexpr int G = C % 8 == 0 ? 8 : C % 4 == 0 ? 4 : C % 2 == 0 ? 2 : 1;
  static int mask(int row) { return G == 8 ? row & 7 : G == 4 ? (row >> 1) & 3 : G == 2 ? (row >> 2) & 1 : 0; }
  static int phys(int chunk, int row) { return G == 1 ? chunk : (chunk & ~(G - 1)) | ((chunk & (G - 1)) ^ mask(row)); }
};
}  // namespace detail
template <int L, int ELEM_BYTES> inline int swizzle_offset(int row, int col) {
  constexpr int EPC = 16 / ELEM_BYTES;
  return row * L + detail::SwizzleGroup<L, ELEM_BYTES>::phys(col / EPC, row) * EPC + col % EPC;
}

// ---- the CUDA lowering's memory intrinsics, done at once (one thread runs at a time) ---------------
template <int N> inline void cp_async_zfill(void* smem, const void* gmem, bool pred = true) {
  if (pred) std::memcpy(smem, gmem, N); else std::memset(smem, 0, N);
}
template <int N> inline void cp_async_pipelined_zfill(void* smem, const void* gmem, bool pred = true) {
  cp_async_zfill<N>(smem, gmem, pred);
}
inline void cp_async_commit() {}
inline void cp_async_wait_all() {}
template <int N> inline void cp_async_wait() {}
inline void fence_proxy_async_shared() {}
template <class D, class S, int V> inline void vec_load_zfill(D* d, const S* p, bool pred = true) {
  for (int i = 0; i < V; ++i) d[i] = pred ? (D)(p[i]) : (D)(0.0f);
}
template <class D, class S, int V> inline void vec_convert(D* p, const S* s, bool pred = true) {
  for (int i = 0; i < V; ++i) p[i] = pred ? (D)(s[i]) : (D)(0.0f);
}
template <class D, class S, int V> inline void vec_store(D* p, const S* s) {
  D t[V];
  for (int i = 0; i < V; ++i) t[i] = (D)(s[i]);
  for (int i = 0; i < V; ++i) p[i] = t[i];
}

}  // namespace tc

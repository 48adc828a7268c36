// tilecraft/reduce.h — warp-shuffle all-reductions over arbitrary subsets of lane bits.
//
// A fragment row is usually spread over a few lanes whose lane ids differ only in some bits
// (for an mma accumulator: the 4 lanes of a quad, bits 0 and 1).  XOR butterflies over exactly
// those bits leave the full reduction in every participating lane (an all-reduce), which is what
// a replicated row-vector fragment needs.  Lanes across warps are combined by the code generator
// through shared memory.
//
//   tc::shfl_xor_reduce<tc::SumOp, 1, 2>(v)     // sum over lanes l^1, l^2, l^3 (a quad)
//   tc::shfl_xor_reduce<tc::MaxOp, 4, 8, 16>(v) // max over lanes sharing lane bits 0-1
//   tc::warp_allreduce<tc::SumOp, 32>(v)         // whole warp; Width = 2, 4, 8, 16 or 32
//
// Constraints: __shfl_xor_sync with the full mask requires all 32 lanes to execute the call
// convergently (never under a lane-divergent branch), otherwise the result is undefined and may
// hang; every mask must be < 32.  Shuffles move 32 bits per lane per instruction; 64-bit types
// cost two.  Supported value types: float, double, half, bf16, int, unsigned, long long.
// Abs-reductions (reduce_abssum / reduce_absmax) apply tc::abs before calling these.
#pragma once

#include "common.h"
#include "math.h"

namespace tc {

struct SumOp {
  template <class T> TC_DEVICE T operator()(T a, T b) const { return a + b; }
  template <class T> static TC_DEVICE T identity() { return cast<T>(0); }
};
struct MaxOp {
  template <class T> TC_DEVICE T operator()(T a, T b) const { return tc::max(a, b); }
  template <class T> static TC_DEVICE T identity() { return min_value<T>(); }
};
struct MinOp {
  template <class T> TC_DEVICE T operator()(T a, T b) const { return tc::min(a, b); }
  template <class T> static TC_DEVICE T identity() { return max_value<T>(); }
};
// bitwise combiners: integer values only (T.warp_reduce_bitand / _bitor / _bitxor)
struct BitAndOp {
  template <class T> TC_DEVICE T operator()(T a, T b) const { return a & b; }
};
struct BitOrOp {
  template <class T> TC_DEVICE T operator()(T a, T b) const { return a | b; }
};
struct BitXorOp {
  template <class T> TC_DEVICE T operator()(T a, T b) const { return a ^ b; }
};

// One xor-shuffle; the overloads of __shfl_xor_sync cover float, double, int, unsigned,
// long long, unsigned long long, __half and __nv_bfloat16.
template <class T>
TC_DEVICE T shfl_xor(T v, int lane_mask, int width = 32) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, width);
}

// The other shuffles of a warp (T.shfl_down / shfl_up / shfl_sync): the full mask, so all 32
// lanes must call them convergently, as for shfl_xor.
template <class T>
TC_DEVICE T shfl_down(T v, int delta, int width = 32) {
  return __shfl_down_sync(0xffffffffu, v, delta, width);
}
template <class T>
TC_DEVICE T shfl_up(T v, int delta, int width = 32) {
  return __shfl_up_sync(0xffffffffu, v, delta, width);
}
template <class T>
TC_DEVICE T shfl_idx(T v, int src_lane, int width = 32) {
  return __shfl_sync(0xffffffffu, v, src_lane, width);
}

// Warp votes, full mask (T.any_sync / T.all_sync / T.ballot): every lane gets the result.
TC_DEVICE int vote_any(bool p) { return __any_sync(0xffffffffu, p); }
TC_DEVICE int vote_all(bool p) { return __all_sync(0xffffffffu, p); }
TC_DEVICE unsigned vote_ballot(bool p) { return __ballot_sync(0xffffffffu, p); }

// All-reduce v over the lanes reachable by XOR with any combination of LaneMasks.
template <class Op, int... LaneMasks, class T>
TC_DEVICE T shfl_xor_reduce(T v) {
  static_assert(sizeof...(LaneMasks) > 0, "give at least one lane mask");
  static_assert(((LaneMasks > 0 && LaneMasks < 32) && ...), "lane masks must be in 1..31");
  const Op op;
  ((v = op(v, shfl_xor(v, LaneMasks))), ...);
  return v;
}

// All-reduce over aligned groups of Width consecutive lanes (Width a power of two <= 32).
template <class Op, int Width = 32, class T>
TC_DEVICE T warp_allreduce(T v) {
  static_assert(Width >= 1 && Width <= 32 && (Width & (Width - 1)) == 0,
                "Width must be a power of two in 1..32");
  const Op op;
#pragma unroll
  for (int mask = Width / 2; mask > 0; mask >>= 1) {
    v = op(v, shfl_xor(v, mask));
  }
  return v;
}

}  // namespace tc

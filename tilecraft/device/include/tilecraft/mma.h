// tilecraft/mma.h — warp-level tensor-core MMA (mma.sync), sm_80+.
//
// One mma.sync.m16n8k16 computes D(16x8) = A(16x16) * B(16x8) + C(16x8) cooperatively across the
// 32 lanes of a warp; each lane holds a fixed slice of every operand ("fragment").  All 32 lanes
// must execute the instruction convergently (.sync.aligned), never under a lane-divergent branch.
//
// Fragment ownership (PTX ISA "Matrix Fragments for mma.m16n8k16"), with
//   g = lane / 4  (groupID, 0..7)      t = lane % 4  (thread in group, 0..3):
//
//   A (16x16, row-major, 16-bit): 4 x .b32 registers, each packing two consecutive-k elements
//     (lower k in the low 16 bits):
//       a[0] = A[g    ][2t, 2t+1]        a[1] = A[g + 8][2t, 2t+1]
//       a[2] = A[g    ][2t+8, 2t+9]      a[3] = A[g + 8][2t+8, 2t+9]
//     (element names a0..a7: a0,a1 in a[0]; a2,a3 in a[1]; a4,a5 in a[2]; a6,a7 in a[3])
//   B (16x8, "col" = k-major per column, 16-bit): 2 x .b32 registers, two consecutive k each:
//       b[0] = B[2t, 2t+1][g]            b[1] = B[2t+8, 2t+9][g]
//   C / D (16x8, f32): 4 floats
//       c[0], c[1] = C[g    ][2t, 2t+1]
//       c[2], c[3] = C[g + 8][2t, 2t+1]
//   C / D (16x8, f16 accumulate): 2 x .b32, c[0] = C[g][2t, 2t+1], c[1] = C[g + 8][2t, 2t+1].
//
// Hence the lanes that share an accumulator row are the 4 lanes of a group (lane bits 0 and 1):
// a row reduction of an mma accumulator is tc::shfl_xor_reduce<Op, 1, 2>(v).
// ldmatrix_x4 on a 16x16 row-major tile yields exactly a[0..3]; ldmatrix_x2_trans on a 16x8
// k-major tile of B yields b[0..1] (see ldmatrix.h).
#pragma once

#include "common.h"

namespace tc {

// D = A * B + C with f16 inputs and f32 accumulation, in place on c.
TC_DEVICE void mma_m16n8k16_f16_f32(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D = A * B + C with bf16 inputs and f32 accumulation (bf16 mma only exists with f32 accumulate).
TC_DEVICE void mma_m16n8k16_bf16_f32(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D = A * B + C with f16 inputs and f16 accumulation (c holds 2 packed half2 registers).
TC_DEVICE void mma_m16n8k16_f16_f16(uint32_t c[2], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
      "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};\n"
      : "+r"(c[0]), "+r"(c[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D = A * B + C with 4-bit signed integer inputs (m16n8k64, .s4) and s32 accumulation (sm_80+; sm_90
// has no int4 tensor cores: ptxas lowers it to other instructions there).  Each .b32 register holds 8
// consecutive-k elements, the lowest k in the lowest nibble: a[0] = A[g][8t..8t+7], a[1] = A[g+8][..],
// a[2] = A[g][32+8t..], a[3] = A[g+8][32+8t..]; b[0] = B[8t..8t+7][g], b[1] = B[32+8t..][g]; c as the
// f32 accumulator of m16n8k16 (c[0..1] row g, cols 2t, 2t+1; c[2..3] row g+8).
TC_DEVICE void mma_m16n8k64_s4_s32(int c[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__)
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  (void)c; (void)a; (void)b;
}

#if defined(TC_FP8)
// D = A * B + C with 8-bit float inputs (m16n8k32, e4m3 or e5m2 for both) and f32 accumulation
// (sm_89+).  Each .b32 register holds 4 consecutive-k bytes: a[0] = A[g][4t..4t+3], a[1] = A[g+8][..],
// a[2] = A[g][16+4t..], a[3] = A[g+8][16+4t..]; b[0] = B[4t..4t+3][g], b[1] = B[16+4t..][g].
template <bool E5M2>
TC_DEVICE void mma_m16n8k32_f8_f32(float c[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (E5M2)
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
  static_assert(E5M2 && !E5M2, "tc::mma_m16n8k32_f8_f32: 8-bit float mma.sync needs sm_89 or newer");
#endif
  (void)c; (void)a; (void)b;
}
#endif

// Packing helpers: build mma operand registers from values held in registers (e.g. the f32
// accumulator of a first gemm re-used as the A operand of a second one, as in attention).
// The first argument lands in the low 16 bits, i.e. at the lower k / column index.
TC_DEVICE uint32_t pack_half2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}
TC_DEVICE uint32_t pack_bfloat162(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}
TC_DEVICE uint32_t pack_half2(half_t lo, half_t hi) {
  __half2 h = __halves2half2(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}
TC_DEVICE uint32_t pack_bfloat162(bfloat16_t lo, bfloat16_t hi) {
  __nv_bfloat162 h = __halves2bfloat162(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

}  // namespace tc

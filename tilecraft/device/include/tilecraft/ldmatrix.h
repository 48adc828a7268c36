// tilecraft/ldmatrix.h — ldmatrix: warp-cooperative load of 8x8 16-bit matrices from shared
// memory straight into mma fragment order, sm_75+ (we target sm_80+).
//
// Each 8x8 matrix is 8 rows of 8 b16 elements = 16 bytes per row.  Every participating lane
// supplies the shared-memory address of ONE row:
//   x1: lanes 0-7 give rows 0-7 of matrix 0 (addresses of lanes 8-31 are ignored)
//   x2: lanes 0-7 matrix 0, lanes 8-15 matrix 1 (lanes 16-31 ignored)
//   x4: lanes 8*i .. 8*i+7 give rows 0-7 of matrix i, i = 0..3
// Constraints: each row address must be 16-byte aligned (a row is fetched as one 16-byte
// shared-memory transaction); the address must lie in the shared state space (hence the
// __cvta_generic_to_shared conversion below — the instruction takes a 32-bit shared address);
// all 32 lanes must execute it convergently (.sync.aligned), even for x1/x2.
// Bank conflicts: the 8 row addresses of one matrix are read in one phase, so they should hit 8
// distinct 16-byte bank groups — that is what the XOR swizzle of shared layouts guarantees.
//
// Result: register r[i] holds matrix i; lane l receives row l/4, elements 2*(l%4) and
// 2*(l%4)+1 (the lower column in the low 16 bits).  With .trans the matrix is transposed on the
// way: lane l receives elements (row 2*(l%4), col l/4) and (row 2*(l%4)+1, col l/4).
//
// mma.m16n8k16 operands (see mma.h):
//   A, 16x16 row-major tile at A_s (row stride lda elements): ldmatrix_x4 with lane l pointing at
//     &A_s[(l % 16) * lda + (l / 16) * 8]  ->  r[0..3] = a[0..3].
//   B stored k-major [k][n] (row stride ldb): ldmatrix_x2_trans with lane l (l < 16) pointing at
//     &B_s[(l % 16) * ldb + n0]  ->  r[0..1] = b[0..1].  (x4_trans covers two n-blocks of 8.)
//   B stored n-major [n][k] (transpose_B): ldmatrix_x2 with lane l pointing at
//     &B_s[(l % 8) * ldb + (l / 8) * 8]  ->  r[0..1] = b[0..1].
#pragma once

#include "common.h"

namespace tc {

// Generic -> 32-bit shared-state-space address (ldmatrix/cp.async/ld.shared take 32-bit
// addresses; a shared window is < 4 GiB so the truncation is exact).
TC_DEVICE uint32_t smem_addr(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

TC_DEVICE void ldmatrix_x1(uint32_t r[1], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(smem_addr(smem_row_ptr)));
}

TC_DEVICE void ldmatrix_x2(uint32_t r[2], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(smem_row_ptr)));
}

TC_DEVICE void ldmatrix_x4(uint32_t r[4], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem_row_ptr)));
}

TC_DEVICE void ldmatrix_x1_trans(uint32_t r[1], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(smem_addr(smem_row_ptr)));
}

TC_DEVICE void ldmatrix_x2_trans(uint32_t r[2], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(smem_row_ptr)));
}

TC_DEVICE void ldmatrix_x4_trans(uint32_t r[4], const void* smem_row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem_row_ptr)));
}

}  // namespace tc

// tilecraft/gemm_sm80.h — block-level GEMM from shared memory on mma.sync m16n8k16 (sm_80+), and
// the shared-memory swizzle the code generator uses to lay out the tiles it feeds it.
//
// ------------------------------------------------------------------------------------------------
// Swizzle.  A row-major [rows][L] tile of ELEM_BYTES-byte elements is stored in 16-byte chunks,
// C = L*ELEM_BYTES/16 chunks per row (L*ELEM_BYTES must be a multiple of 16).  The chunk index is
// XOR-ed with a few row bits inside aligned groups of G chunks:
//   C % 8 == 0 : G = 8, phys = (chunk & ~7) | ((chunk & 7) ^ (row & 7))
//   C % 4 == 0 : G = 4, phys = (chunk & ~3) | ((chunk & 3) ^ ((row >> 1) & 3))   (C == 4: chunk ^ ((row >> 1) & 3))
//   C % 2 == 0 : G = 2, phys = (chunk & ~1) | ((chunk & 1) ^ ((row >> 2) & 1))   (C == 2: chunk ^ ((row >> 2) & 1))
//   C odd      : no swizzle (8 consecutive rows already start in 8 distinct bank groups)
//   offset = row*L + phys*(16/ELEM_BYTES) + col % (16/ELEM_BYTES)      (elements)
// Why: ldmatrix reads one 8x8 b16 matrix as 8 rows x 16 B; those 8 rows (8 consecutive tile rows
// starting at a multiple of 8, same logical chunk) must land in 8 distinct 16-byte bank groups,
// bank group = (row*C + phys) % 8 (with the tile base 128-byte aligned).  G=8: row*C%8 == 0 and
// the XOR with row&7 spreads the 8 rows.  G=4: row*C%8 == 4*(row&1), and (row>>1)&3 takes 4
// distinct values on each parity.  G=2 (C = 2 mod 4): row*C%8 takes the 4 distinct even values
// over row&3, and (row>>2)&1 flips the low bit between rows r and r+4.  Because the XOR stays inside an
// aligned group of G chunks and C % G == 0, phys never leaves the row.  (A rule keyed on C >= 8
// instead of C % 8 == 0 would be wrong for C = 12, 20, ...: the XOR would run past the row end.)
// The same permutation makes 16-byte row-wise global->shared copies (cp.async 16 B per lane, 8
// lanes per 128 B) conflict-free too.
//
// ------------------------------------------------------------------------------------------------
// gemm_ss / gemm_rs: C += op(A) @ op(B) for one thread block (see the declarations below).
// Requirements (checked by static_assert where possible):
//   * T is half_t or bfloat16_t; accumulation in f32.  (gemm_ss with TC_FP8: also fp8_e4m3_t /
//     fp8_e5m2_t with A [M][K], B [N][K] and K % 32 == 0, on mma.sync m16n8k32, sm_89+: see F8Pair.)
//   * M % (16*WM) == 0, N % (8*WN) == 0, K % 16 == 0.
//   * Exactly WM*WN warps take part: the block's, or a T.ws branch's starting at a multiple of WM*WN
//     warps (warp = (threadIdx.x / 32) % (WM*WN)), all 32 lanes
//     of each convergent (ldmatrix/mma are .sync.aligned).
//   * A and B point into shared memory, 16-byte aligned (128-byte aligned for the swizzle to be
//     bank-conflict-free); every stored row (row length * sizeof(T)) is a multiple of 16 bytes,
//     which the divisibility constraints imply for the row lengths K, M (A) and N, K (B).
//   * The caller synchronises (__syncthreads / barriers) around the shared-memory writes; the
//     gemm itself only reads shared memory and has no barrier.
// Every loop is fully unrolled, so all register indices are compile-time constants and C stays
// in registers.  Per k16 step the warp loads all its A and B fragments with ldmatrix (x4; x2 for
// an odd leftover n8 tile of B) into a double buffer one step ahead of the mmas that use them.
// ldmatrix .trans use: A [M][K] plain, A [K][M] .trans, B [K][N] .trans, B [N][K] plain.
#pragma once

#include "common.h"
#include "ldmatrix.h"
#include "mma.h"

namespace tc {

namespace detail {

// Swizzle group (in 16-byte chunks) for rows of L elements of ELEM_BYTES bytes.
template <int L, int ELEM_BYTES>
struct SwizzleGroup {
  static_assert(16 % ELEM_BYTES == 0, "swizzle: element size must divide 16 bytes");
  static_assert((L * ELEM_BYTES) % 16 == 0,
                "swizzle: row length * element size must be a multiple of 16 bytes");
  static constexpr int C = L * ELEM_BYTES / 16;
  static constexpr int G = C % 8 == 0 ? 8 : C % 4 == 0 ? 4 : C % 2 == 0 ? 2 : 1;
  // XOR mask (< G) taken from the row bits; depends only on row % 8.
  static TC_DEVICE int mask(int row) {
    if constexpr (G == 8) return row & 7;
    else if constexpr (G == 4) return (row >> 1) & 3;
    else if constexpr (G == 2) return (row >> 2) & 1;
    else return 0;
  }
  static TC_DEVICE int phys(int chunk, int row) {
    if constexpr (G == 1) return chunk;
    else return (chunk & ~(G - 1)) | ((chunk & (G - 1)) ^ mask(row));
  }
};

}  // namespace detail

template <int L, int ELEM_BYTES>
TC_DEVICE int swizzle_offset(int row, int col) {
  using S = detail::SwizzleGroup<L, ELEM_BYTES>;
  constexpr int EPC = 16 / ELEM_BYTES;  // elements per chunk
  return row * L + S::phys(col / EPC, row) * EPC + col % EPC;
}

namespace detail {

template <class A, class B> using IsSame = IsSameType<A, B>;

template <class T> struct MmaOp;
template <> struct MmaOp<half_t> {
  static TC_DEVICE void run(float* c, const uint32_t a[4], const uint32_t b[2]) {
    mma_m16n8k16_f16_f32(c, a, b);
  }
  static TC_DEVICE uint32_t pack(half_t lo, half_t hi) { return pack_half2(lo, hi); }
};
template <> struct MmaOp<bfloat16_t> {
  static TC_DEVICE void run(float* c, const uint32_t a[4], const uint32_t b[2]) {
    mma_m16n8k16_bf16_f32(c, a, b);
  }
  static TC_DEVICE uint32_t pack(bfloat16_t lo, bfloat16_t hi) { return pack_bfloat162(lo, hi); }
};

// ldmatrix on a 32-bit shared address (the per-fragment address is base + constant, so the
// generic->shared conversion is done once per operand, not per load).
template <bool TRANS>
TC_DEVICE void ldsm_x4(uint32_t* r, uint32_t addr) {
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
template <bool TRANS>
TC_DEVICE void ldsm_x2(uint32_t* r, uint32_t addr) {
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

// Per-lane addressing of a stored row-major [rows][L] tile of 16-bit elements for ldmatrix.
// The lane's row address is   row   = wrow + lane_row + R         (wrow, R multiples of 8)
//                             chunk = wchunk + lane_chunk + c     (lane_chunk in {0, 1})
// where R and c are compile-time after unrolling.  Since the swizzle mask depends on row % 8
// only, it is fixed per lane; when wchunk is a multiple of the swizzle group G (WCHUNK_STRIDE
// % G == 0) and (c is even or lane_chunk == 0), phys = wchunk + (c ^ (lane_chunk ^ mask)), so
// each load costs base + constant-per-(R, c % G) — no per-load swizzle arithmetic.
template <int L, int SWZ, int WCHUNK_STRIDE>
struct FragAddr {
  static constexpr int EPC = 8;  // 16-bit elements per chunk
  using S = SwizzleGroup<L, 2>;
  static constexpr int G = SWZ ? S::G : 1;
  static constexpr bool FAST = G == 1 || WCHUNK_STRIDE % G == 0;
  uint32_t base;  // shared byte address of (wrow + lane_row, [wchunk]) (+ lane chunk when G == 1)
  int x;          // FAST: lane_chunk ^ mask;  else: mask
  int chunk0;     // !FAST: wchunk + lane_chunk

  TC_DEVICE FragAddr(uint32_t smem, int wrow, int wchunk, int lane_row, int lane_chunk) {
    const int m = G == 1 ? 0 : S::mask(lane_row);
    if constexpr (FAST) {
      base = smem + 2u * static_cast<uint32_t>((wrow + lane_row) * L + wchunk * EPC +
                                               (G == 1 ? lane_chunk * EPC : 0));
      x = G == 1 ? 0 : (lane_chunk ^ m);
      chunk0 = 0;
    } else {
      base = smem + 2u * static_cast<uint32_t>((wrow + lane_row) * L);
      x = m;
      chunk0 = wchunk + lane_chunk;
    }
  }
  TC_DEVICE uint32_t at(int R, int c) const {
    int phys;
    if constexpr (G == 1) phys = c;
    else if constexpr (FAST) phys = c ^ x;
    else {
      const int ch = chunk0 + c;
      phys = (ch & ~(G - 1)) | ((ch & (G - 1)) ^ x);
    }
    return base + 2u * static_cast<uint32_t>(R * L + phys * EPC);
  }
};

template <int M, int K, int WM, bool TRANS_A, int SWZ_A, int LA = (TRANS_A ? M : K)>
struct ALoader {
  static constexpr int WTM = M / WM, MI = WTM / 16;
  // !TRANS_A: [M][K], rows m, x4 plain: lane -> (m = l % 16, k-chunk = l / 16)
  //  TRANS_A: [K][M], rows k, x4 .trans: matrix i = l / 8 is (m-half i & 1, k-half i >> 1), so
  //           lane -> (k = l % 8 + 8 * (l / 16), m-chunk = (l / 8) & 1)
  // LA: the stored row length (elements) -- the tile's own width, or its parent's when the
  // operand is a column slice of a wider shared tile (gemm_ss_ld)
  using Addr = FragAddr<LA, SWZ_A, TRANS_A ? 2 * MI : 0>;
  Addr addr;
  TC_DEVICE ALoader(uint32_t smem, int lane, int wm)
      : addr(smem, TRANS_A ? 0 : wm * WTM, TRANS_A ? wm * (WTM / 8) : 0,
             TRANS_A ? (lane & 7) + ((lane >> 4) << 3) : (lane & 15),
             TRANS_A ? ((lane >> 3) & 1) : (lane >> 4)) {}
  TC_DEVICE void load(uint32_t (&a)[MI][4], int kk) const {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      if constexpr (TRANS_A) ldsm_x4<true>(a[mi], addr.at(16 * kk, 2 * mi));
      else ldsm_x4<false>(a[mi], addr.at(16 * mi, 2 * kk));
    }
  }
};

template <int N, int K, int WN, bool TRANS_B, int SWZ_B, int LB_ = (TRANS_B ? K : N)>
struct BLoader {
  static constexpr int WTN = N / WN, NI = WTN / 8;
  // !TRANS_B: [K][N], rows k, .trans: x4 matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
  //           (k 8-15, n 8-15) -> b[ni][0..1], b[ni+1][0..1]; lane -> (k = l % 16, n-chunk = l / 16).
  //           x2 (odd last tile): lane -> (k = l % 16, n-chunk 0).
  //  TRANS_B: [N][K], rows n, plain: x4 matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
  //           (n 8-15, k 8-15); lane -> (n = l % 8 + 8 * (l / 16), k-chunk = (l / 8) & 1).
  //           x2: lane -> (n = l % 8, k-chunk = (l / 8) & 1).
  static constexpr int LB = LB_;  // the stored row length, as ALoader's LA
  using Addr = FragAddr<LB, SWZ_B, TRANS_B ? 0 : NI>;
  Addr addr, addr2;
  TC_DEVICE BLoader(uint32_t smem, int lane, int wn)
      : addr(smem, TRANS_B ? wn * WTN : 0, TRANS_B ? 0 : wn * NI,
             TRANS_B ? (lane & 7) + ((lane >> 4) << 3) : (lane & 15),
             TRANS_B ? ((lane >> 3) & 1) : (lane >> 4)),
        addr2(smem, TRANS_B ? wn * WTN : 0, TRANS_B ? 0 : wn * NI,
              TRANS_B ? (lane & 7) : (lane & 15), TRANS_B ? ((lane >> 3) & 1) : 0) {}
  TC_DEVICE void load(uint32_t (&b)[NI][2], int kk) const {
#pragma unroll
    for (int ni = 0; ni + 1 < NI; ni += 2) {
      uint32_t r[4];
      if constexpr (TRANS_B) ldsm_x4<false>(r, addr.at(8 * ni, 2 * kk));
      else ldsm_x4<true>(r, addr.at(16 * kk, ni));
      b[ni][0] = r[0]; b[ni][1] = r[1]; b[ni + 1][0] = r[2]; b[ni + 1][1] = r[3];
    }
    if constexpr (NI % 2 == 1) {
      if constexpr (TRANS_B) ldsm_x2<false>(b[NI - 1], addr2.at(8 * (NI - 1), 2 * kk));
      else ldsm_x2<true>(b[NI - 1], addr2.at(16 * kk, NI - 1));
    }
  }
};

#if defined(TC_FP8)
// Two 8-bit floats of a K-major row seen as one 16-bit element: the mma.sync m16n8k32 .e4m3/.e5m2
// fragments hold, byte for byte, what the m16n8k16 f16 fragments hold for a tile of half the
// row length (A: a[0] = A[g][4t..4t+3] = the f16 A[g][2t, 2t+1], ...; B [N][K]: b[0] = B[g][4t..4t+3]),
// and swizzle_offset<L, 1> puts the bytes where swizzle_offset<L/2, 2> does, so gemm_ss on
// F8Pair<F8> with K/2 issues the k32 fp8 mma on the same ldmatrix loads.  K-major operands only
// (ldmatrix .trans moves 16-bit elements, not bytes).
template <class F8> struct F8Pair { unsigned short bits; };
template <class T> struct IsF8 { static constexpr bool value = false; };
template <> struct IsF8<fp8_e4m3_t> { static constexpr bool value = true; };
template <> struct IsF8<fp8_e5m2_t> { static constexpr bool value = true; };
template <class F8> struct MmaOp<F8Pair<F8>> {
  static TC_DEVICE void run(float* c, const uint32_t a[4], const uint32_t b[2]) {
    mma_m16n8k32_f8_f32<IsSameType<F8, fp8_e5m2_t>::value>(c, a, b);
  }
};
#endif

// Four int4 of a K-major row seen as one 16-bit element (F8Pair's trick, a level down): the m16n8k64
// .s4 fragments hold, byte for byte, what the m16n8k16 f16 fragments hold for a tile of a quarter of
// the row length (A: a[0] = A[g][8t..8t+7] = the 16-bit units 2t, 2t+1 of row g, ...; B [N][K] likewise),
// and the s32 accumulator has the f32 one's layout, so gemm_ss on S4Quad with K/4 issues the k64 int4
// mma on the same ldmatrix loads.  K-major operands only; unswizzled (int4 tiles are never swizzled).
struct S4Quad { unsigned short bits; };
template <> struct MmaOp<S4Quad> {
  // C is the caller's int accumulator, handed through gemm_ss's float* unread (only offsets are taken)
  static TC_DEVICE void run(float* c, const uint32_t a[4], const uint32_t b[2]) {
    mma_m16n8k64_s4_s32(reinterpret_cast<int*>(c), a, b);
  }
};

template <class T>
struct CheckElem {
  static_assert(IsSame<T, half_t>::value || IsSame<T, bfloat16_t>::value,
                "tc::gemm: T must be tc::half_t or tc::bfloat16_t");
  static constexpr bool ok = true;
};
#if defined(TC_FP8)
template <class F8> struct CheckElem<F8Pair<F8>> { static constexpr bool ok = true; };
#endif
template <> struct CheckElem<S4Quad> { static constexpr bool ok = true; };

}  // namespace detail

// The default gemm_ss hook: nothing.
struct NoHook {
  TC_DEVICE void operator()() const {}
};

// C += op(A) @ op(B) for one thread block on mma.sync m16n8k16 (f16/bf16 in, f32 accumulate).
// Warp w = threadIdx.x / 32 has wm = w % WM, wn = w / WM and owns rows [wm*M/WM, (wm+1)*M/WM),
// cols [wn*N/WN, (wn+1)*N/WN).  C (this thread's registers, MI*NI*4 floats with MI = M/WM/16,
// NI = N/WN/8): slot = e + 2*h + 4*(ni + NI*mi) holds
//   row = wm*M/WM + 16*mi + 8*h + lane/4,   col = wn*N/WN + 8*ni + 2*(lane%4) + e.
// A: !TRANS_A [M][K], TRANS_A [K][M];  B: !TRANS_B [K][N], TRANS_B [N][K]  (shared, row-major).
// SWZ_A / SWZ_B: 0 plain, 1 swizzle_offset<stored row length, sizeof(T)>.
// hook() (optional) runs once, after the last k16 step's fragments are in registers and before
// its mmas: tc::PipelineBarrier<N> there lets a pipelined loop's wait + barrier overlap the mmas.
// gemm_ss_ld: the same, where A or B is a column slice of a wider shared tile: LDA / LDB are the
// stored row lengths in elements (A: K, or M when transposed; B: N, or K when transposed, for a
// whole tile).  A slice starts on a 16-byte boundary, and on a swizzle-group boundary (8 chunks) of a
// swizzled tile, at a row that is a multiple of 8: the lowering checks (transform/cuda_ops/gemm.py).
template <int M, int N, int K, int WM, int WN, bool TRANS_A, bool TRANS_B, int SWZ_A, int SWZ_B,
          class T, int LDA, int LDB, class Hook = NoHook>
TC_DEVICE void gemm_ss_ld(const T* A, const T* B, float* C, Hook hook = Hook());

template <int M, int N, int K, int WM, int WN, bool TRANS_A, bool TRANS_B, int SWZ_A, int SWZ_B,
          class T, class Hook = NoHook>
TC_DEVICE void gemm_ss(const T* A, const T* B, float* C, Hook hook = Hook()) {
  gemm_ss_ld<M, N, K, WM, WN, TRANS_A, TRANS_B, SWZ_A, SWZ_B, T, (TRANS_A ? M : K), (TRANS_B ? K : N)>(A, B, C, hook);
}

template <int M, int N, int K, int WM, int WN, bool TRANS_A, bool TRANS_B, int SWZ_A, int SWZ_B,
          class T, int LDA, int LDB, class Hook>
TC_DEVICE void gemm_ss_ld(const T* A, const T* B, float* C, Hook hook) {
#if defined(TC_FP8)
  if constexpr (detail::IsF8<T>::value) {  // mma.sync m16n8k32 .e4m3/.e5m2 (sm_89+): see F8Pair
    static_assert(!TRANS_A && TRANS_B, "tc::gemm_ss: 8-bit operands must both be K-major (A [M][K], B [N][K])");
    static_assert(K % 32 == 0 && LDA % 2 == 0 && LDB % 2 == 0,
                  "tc::gemm_ss: K must be a multiple of 32 for 8-bit operands (mma k32 steps)");
    using P = detail::F8Pair<T>;
    gemm_ss_ld<M, N, K / 2, WM, WN, false, true, SWZ_A, SWZ_B, P, LDA / 2, LDB / 2>(
        reinterpret_cast<const P*>(A), reinterpret_cast<const P*>(B), C, hook);
    return;
  } else
#endif
  {
  static_assert(detail::CheckElem<T>::ok, "");
  static_assert(WM >= 1 && WN >= 1, "tc::gemm_ss: WM and WN must be >= 1");
  static_assert(M % (16 * WM) == 0, "tc::gemm_ss: M must be a multiple of 16*WM (m16 tiles per warp)");
  static_assert(N % (8 * WN) == 0, "tc::gemm_ss: N must be a multiple of 8*WN (n8 tiles per warp)");
  static_assert(K % 16 == 0, "tc::gemm_ss: K must be a multiple of 16 (mma k16 steps)");
  static_assert(SWZ_A == 0 || SWZ_A == 1, "tc::gemm_ss: SWZ_A must be 0 or 1");
  static_assert(SWZ_B == 0 || SWZ_B == 1, "tc::gemm_ss: SWZ_B must be 0 or 1");
  constexpr int MI = M / WM / 16, NI = N / WN / 8, KS = K / 16;
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) % (WM * WN);  // a T.ws branch: from 0
  const int wm = warp % WM, wn = warp / WM;
  const detail::ALoader<M, K, WM, TRANS_A, SWZ_A, LDA> la(smem_addr(A), lane, wm);
  const detail::BLoader<N, K, WN, TRANS_B, SWZ_B, LDB> lb(smem_addr(B), lane, wn);
  uint32_t a[2][MI][4];
  uint32_t b[2][NI][2];
  la.load(a[0], 0);
  lb.load(b[0], 0);
#pragma unroll
  for (int kk = 0; kk < KS; ++kk) {
    if (kk + 1 < KS) {  // fragments of the next k16 step in flight while this step's mmas issue
      la.load(a[(kk + 1) & 1], kk + 1);
      lb.load(b[(kk + 1) & 1], kk + 1);
    } else {
      hook();
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
        detail::MmaOp<T>::run(C + 4 * (ni + NI * mi), a[kk & 1][mi], b[kk & 1][ni]);
    }
  }
  }
}

// C (int32) += A @ B^T for int4 tiles A [M][K], B [N][K] in shared memory, two elements a byte (the even
// k in the low nibble), on mma.sync m16n8k64 .s4 (sm_80+): gemm_ss's warps, C slots and hook, K % 64 == 0.
template <int M, int N, int K, int WM, int WN, class Hook = NoHook>
TC_DEVICE void gemm_ss_s4(const int8_t* A, const int8_t* B, int* C, Hook hook = Hook()) {
  static_assert(K % 64 == 0, "tc::gemm_ss_s4: K must be a multiple of 64 (mma k64 steps of int4)");
  using Q = detail::S4Quad;
  gemm_ss_ld<M, N, K / 4, WM, WN, false, true, 0, 0, Q, K / 4, K / 4>(
      reinterpret_cast<const Q*>(A), reinterpret_cast<const Q*>(B), reinterpret_cast<float*>(C), hook);
}

// As gemm_ss, with A taken from registers: A_regs is this thread's M x K tile in the accumulator
// layout above with WN = 1 (warp w = threadIdx.x / 32 owns rows [w*M/WM, (w+1)*M/WM), all K):
// element (row, k) of tile (mi, nk) at A_regs[e + 2*h + 4*(nk + (K/8)*mi)],
//   row = wm*M/WM + 16*mi + 8*h + lane/4,   k = 8*nk + 2*(lane%4) + e.
// (FlashAttention's P @ V: P's f32 accumulator converted to T is used as the mma A operand.)
// For k-step kk the A fragment is {pack(A[mi][2kk][h=0]), pack(A[mi][2kk][h=1]),
// pack(A[mi][2kk+1][h=0]), pack(A[mi][2kk+1][h=1])}.  Requires WN == 1; B as in gemm_ss.
// gemm_rs_ld: B a column slice of a wider shared tile, LDB its stored row length (as gemm_ss_ld).
template <int M, int N, int K, int WM, int WN, bool TRANS_B, int SWZ_B, class T, int LDB>
TC_DEVICE void gemm_rs_ld(const T* A_regs, const T* B, float* C);

template <int M, int N, int K, int WM, int WN, bool TRANS_B, int SWZ_B, class T>
TC_DEVICE void gemm_rs(const T* A_regs, const T* B, float* C) {
  gemm_rs_ld<M, N, K, WM, WN, TRANS_B, SWZ_B, T, (TRANS_B ? K : N)>(A_regs, B, C);
}

template <int M, int N, int K, int WM, int WN, bool TRANS_B, int SWZ_B, class T, int LDB>
TC_DEVICE void gemm_rs_ld(const T* A_regs, const T* B, float* C) {
  static_assert(detail::CheckElem<T>::ok, "");
  static_assert(WN == 1, "tc::gemm_rs: A in registers requires WN == 1 (warps only along M)");
  static_assert(WM >= 1, "tc::gemm_rs: WM must be >= 1");
  static_assert(M % (16 * WM) == 0, "tc::gemm_rs: M must be a multiple of 16*WM (m16 tiles per warp)");
  static_assert(N % (8 * WN) == 0, "tc::gemm_rs: N must be a multiple of 8*WN (n8 tiles per warp)");
  static_assert(K % 16 == 0, "tc::gemm_rs: K must be a multiple of 16 (mma k16 steps)");
  static_assert(SWZ_B == 0 || SWZ_B == 1, "tc::gemm_rs: SWZ_B must be 0 or 1");
  constexpr int MI = M / WM / 16, NI = N / WN / 8, KS = K / 16, NK = K / 8;
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) % (WM * WN);  // a T.ws branch: from 0
  const int wn = warp / WM;
  const detail::BLoader<N, K, WN, TRANS_B, SWZ_B, LDB> lb(smem_addr(B), lane, wn);
  uint32_t b[2][NI][2];
  lb.load(b[0], 0);
#pragma unroll
  for (int kk = 0; kk < KS; ++kk) {
    if (kk + 1 < KS) lb.load(b[(kk + 1) & 1], kk + 1);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const T* p = A_regs + 4 * (2 * kk + NK * mi);
      uint32_t a[4];
      a[0] = detail::MmaOp<T>::pack(p[0], p[1]);  // rows g,   k 2t..   (nk = 2kk,   h = 0)
      a[1] = detail::MmaOp<T>::pack(p[2], p[3]);  // rows g+8, k 2t..   (nk = 2kk,   h = 1)
      a[2] = detail::MmaOp<T>::pack(p[4], p[5]);  // rows g,   k 8+2t.. (nk = 2kk+1, h = 0)
      a[3] = detail::MmaOp<T>::pack(p[6], p[7]);  // rows g+8, k 8+2t.. (nk = 2kk+1, h = 1)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) detail::MmaOp<T>::run(C + 4 * (ni + NI * mi), a, b[kk & 1][ni]);
    }
  }
}

}  // namespace tc

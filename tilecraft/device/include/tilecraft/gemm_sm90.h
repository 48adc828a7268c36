// tilecraft/gemm_sm90.h — block-level GEMM from shared memory on Hopper warpgroup MMA
// (wgmma.mma_async m64nNk16, sm_90a only), and the shared-memory layout it reads.
//
// ------------------------------------------------------------------------------------------------
// Layout: tc::swizzle_offset_sm90<L, ELEM_BYTES>(row, col) for a row-major [rows][L] tile.
// wgmma reads shared memory through a 64-bit matrix descriptor; the hardware knows only a few
// layouts ("canonical layouts", PTX ISA 9.7.15.5.1.2): 8-row x S-byte swizzle atoms whose rows are
// exactly S bytes apart (S = 32, 64, 128), 16-byte chunk bits [4, 4+log2(S/16)) of the *absolute*
// shared address XOR-ed with bits [7, 7+log2(S/16)) (Swizzle<1|2|3, 4, 3>), atoms repeated at two
// programmable strides (LBO, SBO).  Which rows of tc::swizzle_offset (gemm_sm80.h) are such atoms:
//   row bytes RB = L*ELEM_BYTES
//   RB = 128 (64 halves): phys chunk = chunk ^ (row & 7), row pitch 128  == SWIZZLE_128B exactly
//   RB =  64 (32 halves): phys chunk = chunk ^ ((row >> 1) & 3), pitch 64 == SWIZZLE_64B exactly
//   RB =  32 (16 halves): phys chunk = chunk ^ ((row >> 2) & 1), pitch 32 == SWIZZLE_32B exactly
//   RB =  16 ( 8 halves): no swizzle, pitch 16 == the no-swizzle ("interleave") core matrix
//                         (usable only where the row runs along M/N: B [K][8], i.e. N == 8)
//   RB = 256, 512, ...:   swizzle_offset XORs within 128-byte groups but rows are RB apart, while
//                         every hardware atom has rows S <= 128 bytes apart: NOT describable.
//   RB = 48, 96, 160, 192, ... (not 16/32/64 or a multiple of 128): not describable either.
// So swizzle_offset_sm90 is swizzle_offset for RB <= 128, and for RB a multiple of 128 it cuts the
// tile's columns into RB/128 panels of 128 bytes (W = 128/ELEM_BYTES elements) and stores the
// panels one after another, each a [ROWS][W] stack of SWIZZLE_128B atoms (8 rows, 1024 bytes):
//   offset = (col / W) * ROWS*W + row * W + ((col % W) / EPC ^ row % 8) * EPC + col % EPC
//                                                             (elements, EPC = 16 / ELEM_BYTES)
// (for RB = 128 this is the same formula with one panel; ROWS, the tile's row count, matters only
// with panels).  Panel after panel is what one TMA box of [ROWS][W] writes with SWIZZLE_128B, so a
// tile loads with one box per panel (layout/tma.py).  Every other RB is a static_assert.
// The 16-byte chunks stay whole, so 16-byte copies (cp.async, uint4 stores) are unchanged, and a
// warp storing 8 chunks of one row (or one chunk of 8 rows) still hits 8 distinct bank groups.
//
// Descriptors built from it (in bytes; "MN" is M for A and N for B):
//   K-major operand  (A [M][K] = !TRANS_A, B [N][K] = TRANS_B; row length L = K):
//     RB in {32, 64, 128, 128P} -> SWIZZLE_32B / 64B / 128B, SBO = 8*min(RB, 128) (next 8 MN
//     rows), LBO unused (encoded 1).  Sub-matrix (mn0, k0) starts at
//     (mn0/8)*SBO + (k0/W)*PANEL + (k0%W)*ELEM_BYTES    (W = min(L, 128/ELEM_BYTES), PANEL = ROWS*128)
//     i.e. one k16 step moves the start 32 bytes inside the swizzle row (the hardware applies the
//     XOR to the absolute address, so this is exact when the tile is pattern-aligned).
//   MN-major operand (A [K][M] = TRANS_A, B [K][N] = !TRANS_B; row length L = M or N):
//     RB in {32, 64, 128}: SWIZZLE_32B/64B/128B, SBO = 8*RB (next 8 k rows), LBO unused (1);
//     RB = 128P:           SWIZZLE_128B, SBO = 1024 (next 8 k rows), LBO = PANEL (next
//                          64-element MN panel);
//     RB = 16:             no swizzle, LBO = 128 (next 8 k rows), SBO unused (1).
//     Sub-matrix (mn0, k0), k0 % 8 == 0, mn0 % W == 0, starts at (k0/8)*SBO + (mn0/W)*PANEL.
//   Supported stored row lengths (16-bit T): K-major 16, 32, 64, 64j halves (K = 16, 32, 64,
//   128, 192, ...); MN-major 8 (B only), 16, 32, 64, 64j halves.  K % 16 == 0 always.
//
// ALIGNMENT: the tile base address must be aligned to the swizzle pattern: 1024 bytes for
// SWIZZLE_128B (RB >= 128), 512 for RB = 64, 256 for RB = 32, 16 for RB = 16.  (The matrix base
// offset field stays 0; a misaligned tile silently reads a differently permuted matrix.)
// Dynamic shared memory: declare `extern __shared__ __align__(1024) unsigned char smem[]` and
// give each wgmma operand buffer an offset that is a multiple of 1024.
//
// ------------------------------------------------------------------------------------------------
// gemm_ss_sm90: see the declaration below for the C register mapping.
// Ordering contract (the gemm itself has no barrier and no proxy fence):
//   * Shared memory written by ordinary stores (st.shared, also cp.async — a generic-proxy write)
//     is read by wgmma through the async proxy: every writing thread must execute
//     tc::fence_proxy_async_shared() (fence.proxy.async.shared::cta) after its writes (after
//     cp.async.wait_group for cp.async) and before the __syncthreads() that precedes the gemm.
//     Writes by TMA (cp.async.bulk.tensor) are already in the async proxy: an mbarrier wait
//     suffices.
//   * The gemm returns after wgmma.wait_group 0: the accumulators are final and the A/B shared
//     memory is no longer being read, so the caller may overwrite A/B after its usual barrier.
//   * All 128 threads of each warpgroup call it convergently (wgmma is .sync.aligned), with
//     blockDim.x == 128*WG (1-D) and warpgroup g = threads [128g, 128g+128).
//   * C is touched only through compile-time indices (all loops unroll), so it stays in registers.
//
// Switching the code generator from tc::gemm_ss<..., SWZ=1> to tc::gemm_ss_sm90 (target sm_90a):
//   1. Address the A/B shared buffers with tc::swizzle_offset_sm90<L, sizeof(T)> instead of
//      tc::swizzle_offset<L, sizeof(T)> (identical for rows of 16/32/64/128 bytes; differs for
//      rows of 256, 384, ... bytes; any other row length cannot feed wgmma: use gemm_ss then).
//   2. Place each such buffer at a 1024-byte-aligned shared offset, with the dynamic shared
//      array declared __align__(1024).
//   3. After the copies into A/B: cp.async.wait_group (if cp.async), then
//      tc::fence_proxy_async_shared() in every thread, then __syncthreads(), then the gemm.
//   4. Threads: 128*WG, warps along M only (WN = 1): WG = M/64 or M/128 for M/WG in {64, 128}.
//   5. Epilogues/reductions use the C mapping documented at gemm_ss_sm90 (same per-slot formula
//      as gemm_ss with WM = 4*WG, WN = 1 when M/WG == 64).
#pragma once

#include "common.h"
#include "ldmatrix.h"
#include "gemm_sm80.h"

// The wgmma wrappers (generated, one per n = 8..256) cost NVRTC ~10 ms of parsing per sm_90a
// translation unit; generated code whose kernel calls no gemm_ss_sm90 may #define TC_NO_WGMMA
// before including tilecraft.h to skip them.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL) && !defined(TC_NO_WGMMA)
#define TC_HAS_WGMMA 1
#include "wgmma.h"
#endif

namespace tc {

namespace detail {

// Row geometry of a [rows][L] tile of ELEM_BYTES-byte elements in the sm90 layout.
template <int L, int ELEM_BYTES>
struct Sm90Rows {
  static constexpr int RB = L * ELEM_BYTES;                  // bytes per stored row
  static constexpr bool PANELS = RB > 128;                    // split into 128-byte panels
  static constexpr bool OK = RB == 16 || RB == 32 || RB == 64 || (RB > 0 && RB % 128 == 0);
  static constexpr int W = PANELS ? 128 / ELEM_BYTES : L;    // elements per panel row
  static constexpr int EPC = 16 / ELEM_BYTES;                 // elements per 16-byte chunk
  // descriptor swizzle field: 0 none, 1 128B, 2 64B, 3 32B
  static constexpr int MODE = RB == 16 ? 0 : RB == 32 ? 3 : RB == 64 ? 2 : 1;
  // alignment the tile base needs (bytes): the swizzle pattern's repeat
  static constexpr int ALIGN = RB == 16 ? 16 : RB == 32 ? 256 : RB == 64 ? 512 : 1024;
};

}  // namespace detail

// Element offset of (row, col) in a [ROWS][L] tile stored for wgmma (see the top of this file).
// Equal to tc::swizzle_offset<L, ELEM_BYTES> whenever L*ELEM_BYTES <= 128 (ROWS unused then).
template <int L, int ELEM_BYTES, int ROWS = 0>
TC_DEVICE int swizzle_offset_sm90(int row, int col) {
  using R = detail::Sm90Rows<L, ELEM_BYTES>;
  static_assert(16 % ELEM_BYTES == 0, "tc::swizzle_offset_sm90: element size must divide 16 bytes");
  static_assert(R::OK,
                "tc::swizzle_offset_sm90: a row must be 16, 32, 64 or a multiple of 128 bytes "
                "(8/16/32 or a multiple of 64 halves); other row lengths match no wgmma layout");
  if constexpr (!R::PANELS) {
    return swizzle_offset<L, ELEM_BYTES>(row, col);
  } else {
    static_assert(ROWS > 0 && ROWS % 8 == 0,
                  "tc::swizzle_offset_sm90: rows over 128 bytes are stored in column panels of "
                  "ROWS rows each: give the tile's row count (a multiple of 8)");
    constexpr int W = R::W, EPC = R::EPC;
    const int cw = col % W;
    return (col / W) * (ROWS * W) + row * W + (((cw / EPC) ^ (row & 7)) * EPC) + cw % EPC;
  }
}

// fence.proxy.async.shared::cta: makes this thread's earlier generic-proxy shared-memory writes
// (st.shared, cp.async after its wait) visible to later async-proxy reads (wgmma, TMA store)
// once a barrier orders them.  Every writing thread runs it before the barrier.  (sm_90+; a
// no-op on older targets, where no async-proxy reader exists.)
TC_DEVICE void fence_proxy_async_shared() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

namespace detail {

// Matrix descriptor of one wgmma operand stored row-major [ROWS][L] with swizzle_offset_sm90<L, 2, ROWS>.
// K_MAJOR: rows run along M/N and L = K (A !TRANS_A, B TRANS_B); else rows are k and L = M or N.
template <int L, int ELEM_BYTES, bool K_MAJOR, int ROWS>
struct Sm90Operand {
  using R = Sm90Rows<L, ELEM_BYTES>;
  static constexpr bool OK = R::OK && (K_MAJOR ? R::RB >= 32 : true) && (!R::PANELS || ROWS % 8 == 0);
  static constexpr int MODE = R::MODE;
  static constexpr int PANEL_BYTES = ROWS * 128;             // one [ROWS][W] column panel
  static constexpr int SBO_BYTES = (K_MAJOR || R::MODE != 0) ? 8 * (R::PANELS ? 128 : R::RB) : 16;
  static constexpr int LBO_BYTES = (!K_MAJOR && R::MODE == 0) ? 8 * R::RB
                                   : (!K_MAJOR && R::PANELS) ? PANEL_BYTES : 16;
  static_assert(SBO_BYTES / 16 < (1 << 14) && LBO_BYTES / 16 < (1 << 14),
                "tc::gemm_ss_sm90: tile too large for the 14-bit descriptor strides");
  // Descriptor bits other than the start address.
  static constexpr uint64_t FIELDS = (static_cast<uint64_t>(LBO_BYTES >> 4) << 16) |
                                     (static_cast<uint64_t>(SBO_BYTES >> 4) << 32) |
                                     (static_cast<uint64_t>(MODE) << 62);
  // Byte offset of the sub-matrix whose first element is (mn0, k0) in (M or N, K) coordinates.
  // K-major: mn0 % 8 == 0, k0 % 16 == 0.  MN-major: k0 % 8 == 0, mn0 % W == 0.
  __host__ __device__ static constexpr int offset(int mn0, int k0) {
    return K_MAJOR ? (mn0 / 8) * SBO_BYTES + (k0 / R::W) * PANEL_BYTES + (k0 % R::W) * ELEM_BYTES
                   : (k0 / 8) * (R::MODE == 0 ? LBO_BYTES : SBO_BYTES) + (mn0 / R::W) * PANEL_BYTES;
  }
  static TC_DEVICE uint64_t desc(uint32_t smem_byte_addr) {
    return FIELDS | static_cast<uint64_t>((smem_byte_addr & 0x3FFFFu) >> 4);
  }
};

template <int N, int N0 = 0>
struct Sm90NPieces {
  // wgmma n per instruction: the whole N when N <= 256, else pieces of 256 and the remainder
  // (a multiple of 8; a multiple of 64 for an MN-major B in 128-byte panels, whose pieces must
  // start on a panel).
  static constexpr int NP = N - N0 < 256 ? N - N0 : 256;
};

#if defined(TC_HAS_WGMMA)

TC_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
TC_DEVICE void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int PENDING>
TC_DEVICE void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}
// Pins each accumulator register at this point of the instruction stream: the compiler may not
// move reads/writes of C across it (wgmma writes C behind the compiler's back until wait_group).
template <int NACC>
TC_DEVICE void wgmma_fence_operands(float* C) {
#pragma unroll
  for (int i = 0; i < NACC; ++i) asm volatile("" : "+f"(C[i])::"memory");
}

// All n pieces of one (k step, m64 tile): instruction N0 .. N0+NP of B, accumulators at C + N0/2.
template <int N, int N0, bool BF16, bool TRANS_A, bool TRANS_B, class BOp>
TC_DEVICE void wgmma_n_pieces(float* C, uint64_t da, uint64_t db, int k0) {
  constexpr int NP = Sm90NPieces<N, N0>::NP;
  // imm-trans: A [K][M] (TRANS_A) is M-major -> 1; B [K][N] (!TRANS_B) is N-major -> 1
  WgmmaSS<NP>::template run<BF16, TRANS_A ? 1 : 0, TRANS_B ? 0 : 1>(
      C + N0 / 2, da, db + static_cast<uint64_t>(BOp::offset(N0, k0) >> 4));
  if constexpr (N0 + NP < N) wgmma_n_pieces<N, N0 + NP, BF16, TRANS_A, TRANS_B, BOp>(C, da, db, k0);
}

#if defined(TC_FP8)
// As wgmma_n_pieces for 8-bit floats (k32 per instruction, both operands K-major).
template <int N, int N0, bool E5M2_A, bool E5M2_B, class BOp>
TC_DEVICE void wgmma8_n_pieces(float* C, uint64_t da, uint64_t db, int k0) {
  constexpr int NP = Sm90NPieces<N, N0>::NP;
  WgmmaSS8<NP>::template run<E5M2_A, E5M2_B>(C + N0 / 2, da, db + static_cast<uint64_t>(BOp::offset(N0, k0) >> 4));
  if constexpr (N0 + NP < N) wgmma8_n_pieces<N, N0 + NP, E5M2_A, E5M2_B, BOp>(C, da, db, k0);
}
#endif

// As wgmma_n_pieces with A from registers (a: this thread's 4 registers of the m64k16 A tile).
template <int N, int N0, bool BF16, bool TRANS_B, class BOp>
TC_DEVICE void wgmma_rs_n_pieces(float* C, const uint32_t* a, uint64_t db, int k0) {
  constexpr int NP = Sm90NPieces<N, N0>::NP;
  WgmmaRS<NP>::template run<BF16, TRANS_B ? 0 : 1>(C + N0 / 2, a, db + static_cast<uint64_t>(BOp::offset(N0, k0) >> 4));
  if constexpr (N0 + NP < N) wgmma_rs_n_pieces<N, N0 + NP, BF16, TRANS_B, BOp>(C, a, db, k0);
}

#endif  // sm_90a

template <class T> struct DependentFalse { static constexpr bool value = false; };

// The element types gemm_ss_sm90 takes: 16-bit floats (k16 per wgmma), and with TC_FP8 the 8-bit
// floats (k32 per wgmma; both operands K-major: A [M][K], B [N][K]).
template <class T> struct Sm90Elem {
  static constexpr bool F8 = false, E5M2 = false;
  static constexpr bool ok = CheckElem<T>::ok;
};
#if defined(TC_FP8)
template <> struct Sm90Elem<fp8_e4m3_t> { static constexpr bool F8 = true, E5M2 = false, ok = true; };
template <> struct Sm90Elem<fp8_e5m2_t> { static constexpr bool F8 = true, E5M2 = true, ok = true; };
#endif

}  // namespace detail

// C += op(A) @ op(B) for one thread block of WG warpgroups (blockDim.x == 128*WG) on wgmma
// m64nNk16 (f16/bf16 in, f32 accumulate), synchronous: it returns with the result in C.
// With TC_FP8, T may be fp8_e4m3_t / fp8_e5m2_t: wgmma m64nNk32 .e4m3/.e5m2 (k32 a step, the same
// 32 bytes of a K-major row as a f16 k16 step), both operands K-major (!TRANS_A, TRANS_B): PTX has
// no imm-trans for 8-bit operands.  The products of 8-bit values are exact; the sums land in the f32
// accumulators (DeepSeek-V3 reports Hopper keeping fewer bits while it adds within a wgmma chain, hence
// the block-scaled kernel's promotion into a separate accumulator every 128 of K).
// A: !TRANS_A [M][K], TRANS_A [K][M];  B: !TRANS_B [K][N], TRANS_B [N][K]  (shared memory,
// row-major, stored with tc::swizzle_offset_sm90<row length, sizeof(T)>, base aligned as above).
// Warpgroup g = threadIdx.x / 128 owns rows [g*M/WG, (g+1)*M/WG) (M/WG a multiple of 64) and all
// N columns; each (k16 step, m64 tile) is one wgmma per n piece (n = N when N <= 256).
// C: this thread's MI*N/2 floats, MI = M/WG/64.  With w = (threadIdx.x / 32) % 4 (warp in the
// warpgroup) and lane = threadIdx.x % 32, slot
//     s = e + 2*h + 4*(ni + (N/8)*mi)      (e, h in {0, 1}, ni < N/8, mi < MI)
// holds C[row][col] with
//     row = g*M/WG + 64*mi + 16*w + 8*h + lane/4,      col = 8*ni + 2*(lane%4) + e.
// (The same formula as gemm_ss with WM = 4*WG, WN = 1 when M/WG == 64; for M/WG = 128 a warp's
// rows are {16w..16w+15} + 64*mi, not contiguous.)  Rows of a 4-lane quad are shared, so a row
// reduction is tc::shfl_xor_reduce<Op, 1, 2>, as for mma.sync.
// PENDING (default 0): wgmma groups left in flight on return.  A pipelined main loop passes 1:
// this k tile's group keeps the tensor cores busy while the caller waits for the next tile; the
// call retires the previous tile's group, so its stage of A/B may be refilled once every
// warpgroup has returned (a block barrier).  C must not be touched until tc::wgmma_drain.
// A_ROWS / B_ROWS: the row counts of the shared tiles A and B point into (their column panels'
// height, see the top of this file); by default the gemm's own extents.
// WGN (default 1): warpgroups along N.  The WG warpgroups form WG/WGN along M by WGN along N (for a
// tile of 64 rows and two or more warpgroups): warpgroup g = gn + WGN*gm owns rows [gm*M/(WG/WGN), ...)
// and columns [gn*N/WGN, (gn+1)*N/WGN); C's slots are those above with N -> N/WGN, and
//     row = gm*M/(WG/WGN) + 64*mi + 16*w + 8*h + lane/4,  col = gn*N/WGN + 8*ni + 2*(lane%4) + e.
// A B stored N-major in 128-byte panels needs N/WGN a multiple of the panel width (64 halves); one
// stored N-major without panels cannot be split (its columns share a swizzle row).
template <int M, int N, int K, int WG, bool TRANS_A, bool TRANS_B, class T, int PENDING = 0,
          int A_ROWS = (TRANS_A ? K : M), int B_ROWS = (TRANS_B ? N : K), int WGN = 1>
TC_DEVICE void gemm_ss_sm90(const T* A, const T* B, float* C) {
  using E = detail::Sm90Elem<T>;
  static_assert(E::ok, "");
  static_assert(!E::F8 || (!TRANS_A && TRANS_B),
                "tc::gemm_ss_sm90: 8-bit operands must both be K-major (A [M][K], B [N][K]): wgmma has "
                "no transpose for them");
  constexpr int KSTEP = E::F8 ? 32 : 16;  // k per wgmma instruction (32 bytes of a K-major row)
  static_assert(WG >= 1, "tc::gemm_ss_sm90: WG (warpgroups) must be >= 1");
  static_assert(WGN >= 1 && WG % WGN == 0, "tc::gemm_ss_sm90: WGN must divide WG");
  constexpr int WGM = WG / WGN;
  static_assert(M % (64 * WGM) == 0,
                "tc::gemm_ss_sm90: M must be a multiple of 64*WG/WGN (each warpgroup owns M/(WG/WGN) rows "
                "in m64 tiles)");
  static_assert(N % (8 * WGN) == 0, "tc::gemm_ss_sm90: N/WGN must be a multiple of 8 (wgmma n)");
  static_assert(K % KSTEP == 0, "tc::gemm_ss_sm90: K must be a multiple of 16 (wgmma k16 steps; 32 for 8-bit)");
  using AOp = detail::Sm90Operand<TRANS_A ? M : K, sizeof(T), !TRANS_A, A_ROWS>;
  using BOp = detail::Sm90Operand<TRANS_B ? K : N, sizeof(T), TRANS_B, B_ROWS>;
  static_assert(AOp::OK,
                "tc::gemm_ss_sm90: A's stored row (K halves for A [M][K], M for A [K][M]) must be "
                "16, 32, 64 or a multiple of 64 halves: other lengths match no wgmma smem layout");
  static_assert(BOp::OK,
                "tc::gemm_ss_sm90: B's stored row (N halves for B [K][N], K for B [N][K]) must be "
                "8 (N only), 16, 32, 64 or a multiple of 64 halves: other lengths match no wgmma "
                "smem layout");
  constexpr int WM = M / WGM, WN = N / WGN, MI = WM / 64, KS = K / KSTEP;
  static_assert(WGN == 1 || TRANS_B || (BOp::R::PANELS && WN % BOp::R::W == 0),
                "tc::gemm_ss_sm90: warpgroups along N with B stored [K][N] need N/WGN a multiple of B's "
                "64-half column panels");
#if defined(__CUDA_ARCH__)
#if defined(TC_HAS_WGMMA)
  constexpr bool BF16 = detail::IsSame<T, bfloat16_t>::value;
  (void)BF16;
  // warp-uniform by construction (descriptors must be equal across the warpgroup, and uniform
  // values live in uniform registers, which HGMMA reads its descriptors from)
  // (modulo WG: a T.ws branch of WG warpgroups starting at a multiple of WG numbers them from 0)
  const int g = __shfl_sync(0xffffffffu, (static_cast<int>(threadIdx.x) >> 7) % WG, 0);
  const uint64_t da = AOp::desc(smem_addr(A) + static_cast<uint32_t>((g / WGN) * AOp::offset(WM, 0)));
  const uint64_t db = BOp::desc(smem_addr(B) + static_cast<uint32_t>((g % WGN) * BOp::offset(WN, 0)));
  detail::wgmma_fence_operands<MI * WN / 2>(C);
  detail::wgmma_fence();  // orders the earlier register writes of C before the async reads
#pragma unroll
  for (int kk = 0; kk < KS; ++kk) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      // start-address field += byte offset / 16 (no carry out of the 14-bit field: the offset
      // stays inside the tile, which lies below 256 KiB of shared memory)
      const uint64_t a = da + static_cast<uint64_t>(AOp::offset(64 * mi, KSTEP * kk) >> 4);
#if defined(TC_FP8)
      if constexpr (E::F8)
        detail::wgmma8_n_pieces<WN, 0, E::E5M2, E::E5M2, BOp>(C + mi * (WN / 2), a, db, KSTEP * kk);
      else
#endif
        detail::wgmma_n_pieces<WN, 0, BF16, TRANS_A, TRANS_B, BOp>(C + mi * (WN / 2), a, db, KSTEP * kk);
    }
  }
  detail::wgmma_commit_group();
  detail::wgmma_wait_group<PENDING>();
  detail::wgmma_fence_operands<MI * WN / 2>(C);
#else
  static_assert(detail::DependentFalse<T>::value,
                "tc::gemm_ss_sm90 needs sm_90a (wgmma): compile with "
                "-gencode=arch=compute_90a,code=sm_90a / NVRTC --gpu-architecture=sm_90a, "
                "and without TC_NO_WGMMA");
#endif
#endif  // __CUDA_ARCH__ (the host pass of nvcc sees an empty body)
  (void)A; (void)B; (void)C; (void)MI; (void)KS; (void)WN;
}

namespace detail {
// The wgmmas of C += A * B with A from registers (see gemm_rs_sm90), committed as one group and
// left in flight: `a` receives the packed A fragments (MI*KS*4 registers, [mi][kk][4]), which the
// tensor cores read until the group retires.
template <int M, int N, int K, int WG, bool TRANS_B, class T, int B_ROWS>
TC_DEVICE void gemm_rs_sm90_issue(const T* A_regs, const T* B, float* C, uint32_t* a) {
  static_assert(CheckElem<T>::ok, "");
  static_assert(WG >= 1 && M % (64 * WG) == 0, "tc::gemm_rs_sm90: M must be a multiple of 64*WG");
  static_assert(N % 8 == 0, "tc::gemm_rs_sm90: N must be a multiple of 8 (wgmma n)");
  static_assert(K % 16 == 0, "tc::gemm_rs_sm90: K must be a multiple of 16 (wgmma k16 steps)");
  using BOp = Sm90Operand<TRANS_B ? K : N, sizeof(T), TRANS_B, B_ROWS>;
  static_assert(BOp::OK, "tc::gemm_rs_sm90: B's stored row must be 8 (N only), 16, 32, 64 or a multiple of 64 halves");
  constexpr int MI = M / WG / 64, KS = K / 16, NK = K / 8;
#if defined(__CUDA_ARCH__)
#if defined(TC_HAS_WGMMA)
  constexpr bool BF16 = IsSame<T, bfloat16_t>::value;
  const uint64_t db = BOp::desc(smem_addr(B));
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      const T* p = A_regs + 4 * (2 * kk + NK * mi);
      uint32_t* q = a + 4 * (kk + KS * mi);
      q[0] = MmaOp<T>::pack(p[0], p[1]);
      q[1] = MmaOp<T>::pack(p[2], p[3]);
      q[2] = MmaOp<T>::pack(p[4], p[5]);
      q[3] = MmaOp<T>::pack(p[6], p[7]);
    }
  }
  wgmma_fence_operands<MI * N / 2>(C);
  wgmma_fence();  // orders the register writes of C and of the A fragments before the wgmmas
#pragma unroll
  for (int kk = 0; kk < KS; ++kk) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
      wgmma_rs_n_pieces<N, 0, BF16, TRANS_B, BOp>(C + mi * (N / 2), a + 4 * (kk + KS * mi), db, 16 * kk);
  }
  wgmma_commit_group();
#else
  static_assert(DependentFalse<T>::value,
                "tc::gemm_rs_sm90 needs sm_90a (wgmma): compile with --gpu-architecture=sm_90a, without TC_NO_WGMMA");
#endif
#endif
  (void)A_regs; (void)B; (void)C; (void)a; (void)MI; (void)KS; (void)NK;
}
}  // namespace detail

// As gemm_ss_sm90 (synchronous), with A from registers: A_regs is this
// thread's piece of its warpgroup's [M/WG][K] rows of A in the accumulator layout above with N -> K,
//     slot s = e + 2*h + 4*(nk + (K/8)*mi)  holds  A[g*M/WG + 64*mi + 16*w + 8*h + lane/4][8*nk + 2*(lane%4) + e]
// (FlashAttention's P = softmax(S) converted to T, straight from the S accumulator of a
// gemm_ss_sm90).  wgmma takes A as 4 registers per thread per k16 step: per warp the mma.sync
// m16n8k16 A fragment of its 16 rows, {pack(nk=2kk, h=0), pack(2kk, 1), pack(2kk+1, 0),
// pack(2kk+1, 1)} as in tc::gemm_rs.  B: as in gemm_ss_sm90.
template <int M, int N, int K, int WG, bool TRANS_B, class T, int B_ROWS = (TRANS_B ? N : K)>
TC_DEVICE void gemm_rs_sm90(const T* A_regs, const T* B, float* C) {
  uint32_t a[(M / WG / 64) * (K / 16) * 4];
  detail::gemm_rs_sm90_issue<M, N, K, WG, TRANS_B, T, B_ROWS>(A_regs, B, C, a);
#if defined(__CUDA_ARCH__) && defined(TC_HAS_WGMMA)
  detail::wgmma_wait_group<0>();
  detail::wgmma_fence_operands<(M / WG / 64) * N / 2>(C);
#endif
}

// As gemm_rs_sm90, returning with its wgmma group in flight (FlashAttention-3's overlap: the P V
// gemm of one iteration runs while the next iteration's softmax does): the packed A fragments stay
// in `held` (this thread's (M/WG/64)*(K/16)*4 registers), which nothing may write, and C nothing may
// touch, until tc::wgmma_wait<0, ...>(C) and tc::wgmma_hold_fence(held).
template <int M, int N, int K, int WG, bool TRANS_B, class T, int B_ROWS = (TRANS_B ? N : K)>
TC_DEVICE void gemm_rs_sm90_async(const T* A_regs, const T* B, float* C, uint32_t* held) {
  detail::gemm_rs_sm90_issue<M, N, K, WG, TRANS_B, T, B_ROWS>(A_regs, B, C, held);
}

// Wait until at most PENDING wgmma groups are in flight; then the NACC accumulator registers of C
// (whose group is older than those PENDING) may be read.
template <int PENDING, int NACC>
TC_DEVICE void wgmma_wait(float* C) {
#if defined(__CUDA_ARCH__) && defined(TC_HAS_WGMMA)
  detail::wgmma_wait_group<PENDING>();
  detail::wgmma_fence_operands<NACC>(C);
#endif
  (void)C;
}

// After the wait that retired a gemm_rs_sm90_async: its N held registers may be reused (pins them
// at this point, so the compiler cannot reuse them earlier).
template <int N>
TC_DEVICE void wgmma_hold_fence(uint32_t* held) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(held[i])::"memory");
}

// After a loop of gemm_ss_sm90<..., PENDING = 1> calls: wait for the last wgmma group, then C
// (NACC floats of this thread) may be read.
template <int NACC>
TC_DEVICE void wgmma_drain(float* C) {
#if defined(__CUDA_ARCH__) && defined(TC_HAS_WGMMA)
  detail::wgmma_wait_group<0>();
  detail::wgmma_fence_operands<NACC>(C);
#endif
  (void)C;
}

}  // namespace tc

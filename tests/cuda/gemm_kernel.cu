// A hand-written multi-stage GEMM in the shape tilecraft generates for sm_80: C = A @ B with
// A (M, K) and B (K, N) row-major float16, C (M, N) float16, float32 accumulation.
// Block tile BM x BN x BK = 128 x 128 x 32, 4 warps in a 2 x 2 grid (64 x 64 per warp),
// STAGES-deep cp.async pipeline, ldmatrix + mma.m16n8k16.  Shared tiles are padded by 8 halves
// per row (rows stay 16-byte aligned, consecutive rows shift by 16 bytes: conflict-free ldmatrix).
// Requires K % 8 == 0 and N % 8 == 0 (16-byte rows for cp.async); M, N, K otherwise arbitrary.
// Used by tests/cuda (compile time, SASS, no spills) and tests/gpu (correctness vs torch).
#include <tilecraft/tilecraft.h>

#define BM 128
#define BN 128
#define BK 32
#define STAGES 3
#define LDA (BK + 8)
#define LDB (BN + 8)

extern "C" __global__ void __launch_bounds__(128)
tc_gemm_f16(const half_t* __restrict__ A, const half_t* __restrict__ B, half_t* __restrict__ C,
            int M, int N, int K) {
  extern __shared__ __align__(16) unsigned char smem[];
  half_t* As = reinterpret_cast<half_t*>(smem);            // [STAGES][BM][LDA]
  half_t* Bs = As + STAGES * BM * LDA;                      // [STAGES][BK][LDB]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 2, wn = warp % 2;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int num_k = tc::ceildiv(K, BK);

  auto load_stage = [&](int stage, int kt) {
    const int k0 = kt * BK;
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // A: 128 rows x 4 chunks of 8 halves = 512 chunks
      const int chunk = tid + i * 128, r = chunk / 4, c = (chunk % 4) * 8;
      const bool ok = (m0 + r < M) && (k0 + c < K);
      const half_t* src = ok ? &A[(long long)(m0 + r) * K + k0 + c] : A;
      tc::cp_async_16(&As[(stage * BM + r) * LDA + c], src, ok);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // B: 32 rows x 16 chunks = 512 chunks
      const int chunk = tid + i * 128, r = chunk / 16, c = (chunk % 16) * 8;
      const bool ok = (k0 + r < K) && (n0 + c < N);
      const half_t* src = ok ? &B[(long long)(k0 + r) * N + n0 + c] : B;
      tc::cp_async_16(&Bs[(stage * BK + r) * LDB + c], src, ok);
    }
  };

  float acc[4][8][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_k) load_stage(s, s);
    tc::cp_async_commit();  // commit even when empty: keeps the group count uniform
  }

  for (int kt = 0; kt < num_k; ++kt) {
    tc::cp_async_wait<STAGES - 2>();  // stage kt has landed (for this thread)...
    tc::sync_threads();                // ...and for every thread; stage kt-1 is free again
    const int next = kt + STAGES - 1;
    if (next < num_k) load_stage(next % STAGES, next);
    tc::cp_async_commit();

    const half_t* a_s = &As[(kt % STAGES) * BM * LDA];
    const half_t* b_s = &Bs[(kt % STAGES) * BK * LDB];
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      tc::uint32_t a[4][4], b[8][2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        tc::ldmatrix_x4(a[i], &a_s[(wm * 64 + i * 16 + lane % 16) * LDA + kk + (lane / 16) * 8]);
#pragma unroll
      for (int j = 0; j < 8; j += 2) {
        tc::uint32_t r[4];
        tc::ldmatrix_x4_trans(r, &b_s[(kk + lane % 16) * LDB + wn * 64 + j * 8 + (lane / 16) * 8]);
        b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) tc::mma_m16n8k16_f16_f32(acc[i][j], a[i], b[j]);
    }
  }
  tc::cp_async_wait_all();

  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // h = 0: row g (c0, c1); h = 1: row g + 8 (c2, c3)
        const int row = m0 + wm * 64 + i * 16 + g + h * 8;
        const int col = n0 + wn * 64 + j * 8 + 2 * t;
        if (row < M && col < N) C[(long long)row * N + col] = tc::cast<half_t>(acc[i][j][2 * h]);
        if (row < M && col + 1 < N)
          C[(long long)row * N + col + 1] = tc::cast<half_t>(acc[i][j][2 * h + 1]);
      }
}

// Dynamic shared memory the kernel needs (host side: STAGES * (BM*LDA + BK*LDB) * 2 bytes).
// 3 * (128*40 + 32*136) * 2 = 56832 bytes > 48 KiB, so the launch must opt in.

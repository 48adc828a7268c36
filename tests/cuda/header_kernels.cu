// Kernels that call every function of the tilecraft device headers, for compile + SASS tests.
// They are not meant to compute anything useful; they must compile under NVRTC and nvcc for
// sm_80 and sm_90a, and each kernel must contain the instruction its header exists for.
#include <tilecraft/tilecraft.h>

// mma.h + ldmatrix.h + cp_async.h + memory.h: one 16x16x16 warp tile, staged through shared memory.
extern "C" __global__ void __launch_bounds__(128)
tc_test_mma(const half_t* __restrict__ A, const half_t* __restrict__ B,
            const bfloat16_t* __restrict__ Abf, float* __restrict__ C, tc::uint32_t* __restrict__ H,
            int valid_rows) {
  __shared__ __align__(16) half_t As[16 * 16];
  __shared__ __align__(16) half_t Bs[16 * 16];
  __shared__ __align__(16) bfloat16_t Abs[16 * 16];
  __shared__ __align__(16) float tail[8];
  const int lane = threadIdx.x % 32;
  if (threadIdx.x < 32) {
    // 16x16 halves = 512 bytes = 32 chunks of 16 bytes: one chunk per lane.
    tc::cp_async_16(&As[lane * 8], &A[lane * 8], lane / 2 < valid_rows);
    tc::cp_async_16(&Bs[lane * 8], &B[lane * 8]);
    tc::cp_async_16(&Abs[lane * 8], &Abf[lane * 8]);
    if (lane < 4) tc::cp_async_8(&tail[lane * 2], &C[64 + lane * 2], lane < valid_rows);
    if (lane < 8) tc::cp_async_4(&tail[lane], &C[96 + lane], true);
  }
  tc::cp_async_commit();
  tc::cp_async_wait<1>();
  tc::cp_async_wait<0>();
  tc::cp_async_wait_all();
  tc::sync_threads();

  tc::uint32_t a[4], abf[4], b[2], bt[4], x1[1], x1t[1], x2[2];
  tc::ldmatrix_x4(a, &As[(lane % 16) * 16 + (lane / 16) * 8]);
  tc::ldmatrix_x4(abf, &Abs[(lane % 16) * 16 + (lane / 16) * 8]);
  tc::ldmatrix_x2_trans(b, &Bs[(lane % 16) * 16]);
  tc::ldmatrix_x4_trans(bt, &Bs[(lane % 16) * 16 + (lane / 16) * 8]);
  tc::ldmatrix_x1(x1, &Bs[(lane % 8) * 16]);
  tc::ldmatrix_x1_trans(x1t, &Bs[(lane % 8) * 16 + 8]);
  tc::ldmatrix_x2(x2, &Bs[(lane % 8) * 16 + (lane / 8) * 8]);

  float c[4] = {0.f, 0.f, 0.f, 0.f};
  tc::mma_m16n8k16_f16_f32(c, a, b);
  tc::mma_m16n8k16_f16_f32(c, a, bt + 2);
  tc::mma_m16n8k16_bf16_f32(c, abf, x2);
  tc::uint32_t ch[2] = {x1[0], x1t[0]};
  tc::mma_m16n8k16_f16_f16(ch, a, b);
  // Second gemm with the accumulator re-packed as an A operand (attention's P @ V pattern).
  const tc::uint32_t p[4] = {tc::pack_half2(c[0], c[1]), tc::pack_half2(c[2], c[3]),
                             tc::pack_half2(half_t(c[0]), half_t(c[2])),
                             tc::pack_bfloat162(c[1], c[3])};
  tc::mma_m16n8k16_f16_f32(c, p, b);
  const tc::uint32_t pb[4] = {tc::pack_bfloat162(bfloat16_t(c[0]), bfloat16_t(c[1])), p[1], p[2], p[3]};
  tc::mma_m16n8k16_bf16_f32(c, pb, b);

  // Row max of the accumulator: the 4 lanes of a quad share rows (lane bits 0, 1).
  const float row_max = tc::shfl_xor_reduce<tc::MaxOp, 1, 2>(tc::max(c[0], c[1]));
  const int g = lane / 4, t = lane % 4;
  C[g * 8 + 2 * t] = c[0] - row_max + tail[t];
  C[g * 8 + 2 * t + 1] = c[1];
  C[(g + 8) * 8 + 2 * t] = c[2];
  C[(g + 8) * 8 + 2 * t + 1] = c[3];
  H[lane * 2] = ch[0];
  H[lane * 2 + 1] = ch[1];
}

// reduce.h: every op on every type, lane-subset and whole-warp forms.
extern "C" __global__ void tc_test_reduce(float* f, double* d, half_t* h, bfloat16_t* bf, int* i,
                                          unsigned* u, long long* ll) {
  const int k = threadIdx.x;
  f[k] = tc::shfl_xor_reduce<tc::SumOp, 1, 2>(f[k]) + tc::warp_allreduce<tc::MaxOp>(f[k]) +
         tc::warp_allreduce<tc::MinOp, 8>(f[k]) + tc::SumOp::identity<float>() +
         tc::MaxOp::identity<float>() + tc::MinOp::identity<float>();
  d[k] = tc::shfl_xor_reduce<tc::SumOp, 4, 8, 16>(d[k]) + tc::warp_allreduce<tc::MaxOp, 16>(d[k]);
  h[k] = tc::shfl_xor_reduce<tc::MaxOp, 1>(h[k]) + tc::warp_allreduce<tc::SumOp>(h[k]) +
         tc::warp_allreduce<tc::MinOp, 4>(h[k]);
  bf[k] = tc::shfl_xor_reduce<tc::SumOp, 2, 16>(bf[k]) + tc::warp_allreduce<tc::MaxOp>(bf[k]) +
          tc::warp_allreduce<tc::MinOp, 2>(bf[k]);
  i[k] = tc::warp_allreduce<tc::SumOp>(i[k]) + tc::shfl_xor_reduce<tc::MaxOp, 1, 2, 4>(i[k]) +
         tc::warp_allreduce<tc::MinOp>(i[k]) + tc::MaxOp::identity<int>();
  u[k] = tc::warp_allreduce<tc::SumOp>(u[k]) + tc::warp_allreduce<tc::MaxOp>(u[k]);
  ll[k] = tc::warp_allreduce<tc::SumOp>(ll[k]) + tc::warp_allreduce<tc::MinOp>(ll[k]);
}

// atomic.h: every overload (results ignored -> RED, one used -> ATOM).
extern "C" __global__ void tc_test_atomic(float* f, double* d, int* i, unsigned* u,
                                          unsigned long long* ull, long long* ll, half_t* h,
                                          bfloat16_t* bf, __half2* h2, __nv_bfloat162* bf2,
                                          float* out) {
  const int k = threadIdx.x;
  tc::atomic_add(f, 1.0f);
  tc::atomic_add(d, 2.0);
  tc::atomic_add(i, k);
  tc::atomic_add(u, 3u);
  tc::atomic_add(ull, 4ull);
  tc::atomic_add(ll, -5ll);
  tc::atomic_add(h, half_t(1.0f));
  tc::atomic_add(bf, bfloat16_t(1.0f));
  tc::atomic_add(h2, __floats2half2_rn(1.0f, 2.0f));
  tc::atomic_add(bf2, __floats2bfloat162_rn(1.0f, 2.0f));
  tc::atomic_add_x2(h + 2, half_t(1.0f), half_t(2.0f));
  tc::atomic_add_x2(bf + 2, bfloat16_t(1.0f), bfloat16_t(2.0f));
  tc::atomic_max(f + 1, out[k]);
  tc::atomic_min(f + 2, -out[k]);
  tc::atomic_max(i + 1, k);
  tc::atomic_min(i + 2, -k);
  tc::atomic_max(u + 1, 7u);
  tc::atomic_min(u + 2, 7u);
  tc::atomic_max(ll + 1, 9ll);
  tc::atomic_min(ll + 2, -9ll);
  out[k] = tc::atomic_add(f + 3, 1.0f) + tc::atomic_max(f + 4, 2.0f);
  __shared__ float s[4];
  if (k < 4) s[k] = 0.f;
  tc::sync_threads();
  tc::atomic_add(&s[k % 4], 1.0f);
  tc::sync_threads();
  if (k < 4) out[32 + k] = s[k];
}

// math.h + common.h: every function for float, double, half, bf16 (and ints where defined).
template <class T>
__device__ T tc_test_math_one(T x, T y) {
  T r = tc::exp(x) + tc::exp2(x) + tc::log(x) + tc::log2(x) + tc::sqrt(x) + tc::rsqrt(x) +
        tc::tanh(x) + tc::sigmoid(x) + tc::erf(x) + tc::pow(x, y) + tc::floor(x) + tc::ceil(x) +
        tc::round(x) + tc::fast_exp(x) + tc::fast_log(x) + tc::abs(y) + tc::max(x, y) +
        tc::min(x, y) + tc::infinity<T>() + tc::max_value<T>() + tc::min_value<T>();
  if (tc::isnan(r) || tc::isinf(r)) r = tc::cast<T>(0.0f);
  return r;
}

extern "C" __global__ void tc_test_math(float* f, double* d, half_t* h, bfloat16_t* bf, int* i,
                                        long long* ll, signed char* i8, unsigned char* u8,
                                        short* i16, unsigned short* u16, unsigned* u32,
                                        unsigned long long* u64, bool* b) {
  const int k = threadIdx.x;
  f[k] = tc_test_math_one(f[k], f[k + 1]) + tc::fast_exp2(f[k]) + tc::fast_tanh(f[k]) +
         tc::floordiv(f[k], 3.0f) + tc::floormod(f[k], 3.0f);
  d[k] = tc_test_math_one(d[k], d[k + 1]) + tc::floordiv(d[k], 3.0) + tc::floormod(d[k], 3.0);
  h[k] = tc_test_math_one(h[k], h[k + 1]);
  bf[k] = tc_test_math_one(bf[k], bf[k + 1]);
  // casts among all types
  h[k + 32] = tc::cast<half_t>(bf[k]) + tc::cast<half_t>(f[k]) + tc::cast<half_t>(d[k]) +
              tc::cast<half_t>(i[k]) + tc::cast<half_t>(ll[k]) + tc::cast<half_t>(h[k]);
  bf[k + 32] = tc::cast<bfloat16_t>(h[k]) + tc::cast<bfloat16_t>(f[k]) +
               tc::cast<bfloat16_t>(d[k]) + tc::cast<bfloat16_t>(i[k]) +
               tc::cast<bfloat16_t>(bf[k]) + tc::cast<bfloat16_t>(u8[k]);
  f[k + 32] = tc::cast<float>(h[k]) + tc::cast<float>(bf[k]) + tc::cast<float>(i[k]) +
              tc::cast<float>(d[k]);
  i[k + 32] = tc::cast<int>(h[k]) + tc::cast<int>(bf[k]) + tc::cast<int>(f[k]) +
              tc::cast<int>(b[k]);
  b[k + 32] = tc::cast<bool>(h[k]) || tc::cast<bool>(bf[k]) || tc::cast<bool>(f[k]);
  i8[k] = tc::cast<signed char>(f[k]);
  // integer helpers with Python semantics, and integer limits/abs/max/min
  i[k] = tc::floordiv(i[k], 7) + tc::floormod(i[k], -7) + tc::ceildiv(i[k], 7) +
         tc::abs(i[k]) + tc::max(i[k], 3) + tc::min(i[k], 3) + tc::max_value<int>() +
         tc::min_value<int>() + (tc::isnan(i[k]) ? 1 : 0) + (tc::isinf(i[k]) ? 1 : 0);
  ll[k] = tc::floordiv(ll[k], 7ll) + tc::floormod(ll[k], i[k]) + tc::ceildiv(ll[k], 5) +
          tc::abs(ll[k]) + tc::max_value<long long>() + tc::min_value<long long>();
  u32[k] = tc::floordiv(u32[k], 3u) + tc::floormod(u32[k], 3u) + tc::ceildiv(u32[k], 3u) +
           tc::abs(u32[k]) + tc::max_value<unsigned>() + tc::min_value<unsigned>();
  u64[k] = tc::ceildiv(u64[k], 16ull) + tc::max_value<unsigned long long>() +
           tc::min_value<unsigned long long>();
  i8[k + 32] = tc::max_value<signed char>() + tc::min_value<signed char>() + tc::abs(i8[k]);
  u8[k + 32] = tc::max_value<unsigned char>() + tc::min_value<unsigned char>();
  i16[k] = tc::max_value<short>() + tc::min_value<short>() + tc::floordiv(i16[k], short(3));
  u16[k] = tc::max_value<unsigned short>() + tc::min_value<unsigned short>();
  b[k] = tc::max_value<bool>() && !tc::min_value<bool>();
}

// memory.h: vector loads/stores on global and shared memory, barriers.
extern "C" __global__ void tc_test_memory(const float* __restrict__ in, float* __restrict__ out) {
  __shared__ __align__(16) float s[4 * 128];
  const int k = threadIdx.x;
  tc::st128(&s[4 * k], tc::ld128(&in[4 * k]));
  tc::sync_threads();
  tc::st128(&out[4 * k], tc::ld128(&s[4 * ((k + 1) % 128)]));
  tc::st64(&out[512 + 2 * k], tc::ld64(&s[2 * k]));
  tc::st32(&out[768 + k], tc::ld32(&s[k]) + tc::ldg32(&in[k]));
  tc::st128(&out[1024 + 4 * k], tc::ldg128(&in[4 * k]));
  tc::st64(&out[1536 + 2 * k], tc::ldg64(&in[2 * k]));
  tc::copy_vec<16>(&out[2048 + 4 * k], &in[4 * k]);
  tc::copy_vec<8>(&out[2560 + 2 * k], &in[2 * k]);
  tc::copy_vec<4>(&out[2816 + k], &in[k]);
  tc::sync_warp();
  tc::named_barrier_sync(1, 128);
}

// print.h: every overload.
extern "C" __global__ void tc_test_print(float f, double d, int i, long long ll, unsigned u,
                                         unsigned long long ull, bool b, const half_t* h) {
  tc::print("f", f);
  tc::print("d", d);
  tc::print("h", h[0]);
  tc::print("bf", tc::cast<bfloat16_t>(f));
  tc::print("i", i);
  tc::print("ll", ll);
  tc::print("u", u);
  tc::print("ull", ull);
  tc::print("b", b);
  tc::print("i8", (signed char)i);
  tc::print("u8", (unsigned char)i);
  tc::print("i16", (short)i);
  tc::print("u16", (unsigned short)i);
  tc::print("A_s elem", "A_s", 3, f);
  tc::print("only a message");
}

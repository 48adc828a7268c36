"""FP8 (e4m3) GEMMs: C = A @ B^T with A (M, K) and B (N, K) both K-major, the layout torch._scaled_mm and
DeepSeek's weights use and the one Hopper's fp8 wgmma needs (it reads 8-bit B only K-major, k32 a step).

- `fp8_matmul`: per-tensor scales, C = (A @ B^T) * scale_a * scale_b (scales: 1-element fp32 tensors).
- `fp8_matmul_blockscaled`: DeepSeek-V3's fine-grained scales: A (activations) one fp32 scale per 1x128
  (row, k-block), stored k-major as DeepGEMM takes them -> Scales_A (ceil(K/128), M), so a k-block's scales
  for a tile's rows are one contiguous run (one TMA box; `quantize_fp8_activations` makes them); B
  (weights) one per 128x128 block -> Scales_B (ceil(N/128), ceil(K/128)).  Each 128-deep k-block is multiplied into a fresh accumulator and folded
  into the fp32 result with its scales, which is also DeepGEMM's "promotion": the tensor core's fp8
  accumulation never runs longer than 128 products.
Output fp32 or bf16 (`out_dtype`).
"""
import tilecraft as tilelang
import tilecraft.language as T

GROUP = 128  # DeepSeek's quantization block


@tilelang.jit(out_idx=[-1])
def fp8_matmul(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128, block_K: int = 128,
               num_stages: int = 3, threads: int = 128, out_dtype: str = "bfloat16",
               in_dtype: str = "float8_e4m3fn", accum_dtype: str = "float"):
    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), Scale_A: T.Tensor((1,), "float32"),
             Scale_B: T.Tensor((1,), "float32"), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(panel_size=10)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            scale = Scale_A[0] * Scale_B[0]
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = C_local[i, j] * scale
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


# A producer warpgroup (measured on the H200, session 19, 4096^3 / 8192^3 against torch._scaled_mm per-tensor):
# cp.async 0.51x / 0.43x, TMA unsplit 0.57x / 0.60x, TMA warp-specialized 0.65x / 0.68x -- the two consumer
# warpgroups then meet at no block barrier, so one folds its k-block while the other's wgmma runs.
@tilelang.jit(out_idx=[-1], pass_configs={"tc.warp_specialize": True})
def fp8_matmul_blockscaled(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128,
                           num_stages: int = 3, threads: int = 256, out_dtype: str = "bfloat16",
                           in_dtype: str = "float8_e4m3fn", accum_dtype: str = "float", k_blocks: int = 2,
                           fold_late: bool = True):
    """block_N must divide 128 so that one B scale covers a block's columns.  Each pipeline stage holds
    `k_blocks` scale groups (128 deep each), multiplied into as many partial accumulators and folded in
    order: with 2 (the default) the two gemms of a stage are independent, so on sm_90a both are issued before
    the first partial is folded (transform/overlap_independent_gemms.py).  Measured on the H200 (session 21,
    4096^3 / 8192^3, against torch._scaled_mm per-tensor): k_blocks=1 0.68x / 0.61x, k_blocks=2 0.76x / 0.76x
    (the same with the overlap off: 0.67x / 0.63x).  `fold_late` (default; session 22: 0.776x -> 0.788x,
    0.785x -> 0.793x in one run): the previous stage's second partial is folded while this stage's first gemm
    runs, with its scales kept in registers.  Tried and slower (results/2026-12-03_h200_s22_gpu.md): the same
    loop as a persistent walk over (tile, k-stage) pairs, and 192-row tiles on three warpgroups.  Shared memory: 64 KiB a stage with 2 (three stages fit
    sm_90a's 227 KiB, not sm_80's 163: take k_blocks=1 or num_stages=2 there).  256 threads: two accumulators
    (C_part, C_local) of 128x128 fp32 on wgmma are 128 registers a
    thread on two warpgroups, but 256 on one (255 registers and a stack frame on sm_90a at 128 threads)."""
    if GROUP % block_N:
        raise ValueError(f"fp8_matmul_blockscaled: block_N={block_N} must divide {GROUP} (one weight scale per block)")
    if k_blocks not in (1, 2):
        raise ValueError(f"fp8_matmul_blockscaled: k_blocks={k_blocks} must be 1 or 2 (scale groups per stage)")
    block_K = GROUP * k_blocks
    KB, NB = -(-K // GROUP), -(-N // GROUP)

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype),
             Scales_A: T.Tensor((KB, M), "float32"), Scales_B: T.Tensor((NB, KB), "float32"),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, GROUP), in_dtype)
            B_shared = T.alloc_shared((block_N, GROUP), in_dtype)
            sa_shared = T.alloc_shared((k_blocks, block_M), "float32")
            C_part = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            if k_blocks == 2:   # the second scale group's tiles and partial accumulator
                A2_shared = T.alloc_shared((block_M, GROUP), in_dtype)
                B2_shared = T.alloc_shared((block_N, GROUP), in_dtype)
                C_part2 = T.alloc_fragment((block_M, block_N), accum_dtype)
                scale2 = T.alloc_fragment((block_M,), accum_dtype)   # fold_late: the last stage's second scales
            T.use_swizzle(panel_size=10)
            T.clear(C_local)
            if k_blocks == 2 and fold_late:
                T.clear(C_part2)
                T.clear(scale2)
            for ko in T.Pipelined(T.ceildiv(KB, k_blocks), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                if k_blocks == 2:
                    T.copy(A[by * block_M, ko * block_K + GROUP], A2_shared)
                    T.copy(B[bx * block_N, ko * block_K + GROUP], B2_shared)
                # rows past M (and a second scale group past K) read as 0
                T.copy(Scales_A[ko * k_blocks:(ko + 1) * k_blocks, by * block_M:(by + 1) * block_M], sa_shared)
                if k_blocks == 1:
                    sb = Scales_B[bx * block_N // GROUP, ko]   # read before the gemm: its latency hides under it
                    T.gemm(A_shared, B_shared, C_part, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(block_M, block_N):
                        C_local[i, j] += C_part[i, j] * (sa_shared[0, i] * sb)
                else:
                    sb0 = Scales_B[bx * block_N // GROUP, ko * 2]
                    sb1 = T.if_then_else(ko * 2 + 1 < KB, Scales_B[bx * block_N // GROUP, T.min(ko * 2 + 1, KB - 1)], 0.0)
                    if fold_late:
                        # the previous stage's second partial is folded while this stage's first gemm runs,
                        # this stage's first while its second runs (its scales kept in registers for the next)
                        T.gemm(A_shared, B_shared, C_part, transpose_B=True, clear_accum=True)
                        for i, j in T.Parallel(block_M, block_N):
                            C_local[i, j] += C_part2[i, j] * scale2[i]
                        T.gemm(A2_shared, B2_shared, C_part2, transpose_B=True, clear_accum=True)
                        for i, j in T.Parallel(block_M, block_N):
                            C_local[i, j] += C_part[i, j] * (sa_shared[0, i] * sb0)
                        for i in T.Parallel(block_M):
                            scale2[i] = sa_shared[1, i] * sb1
                    else:
                        # two independent gemms: the compiler issues both before waiting for the first
                        T.gemm(A_shared, B_shared, C_part, transpose_B=True, clear_accum=True)
                        T.gemm(A2_shared, B2_shared, C_part2, transpose_B=True, clear_accum=True)
                        for i, j in T.Parallel(block_M, block_N):
                            C_local[i, j] += C_part[i, j] * (sa_shared[0, i] * sb0)
                        for i, j in T.Parallel(block_M, block_N):
                            C_local[i, j] += C_part2[i, j] * (sa_shared[1, i] * sb1)
            if k_blocks == 2 and fold_late:
                for i, j in T.Parallel(block_M, block_N):
                    C_local[i, j] += C_part2[i, j] * scale2[i]
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


def ref_fp8_matmul(a, b, scale_a, scale_b, out_dtype=None):
    """(A @ B^T) * scale_a * scale_b in fp32 from the fp8 values (torch's dequantized product)."""
    import torch
    c = (a.float() @ b.float().t()) * (scale_a.float() * scale_b.float())
    return c.to(out_dtype or torch.float32)


def ref_fp8_matmul_blockscaled(a, b, scales_a, scales_b, out_dtype=None):
    """Dequantize A per 1x128 (scales_a k-major, (ceil(K/128), M), as the kernel takes them) and B per
    128x128 block, multiply in fp32."""
    import torch
    M, K = a.shape
    N = b.shape[0]
    sa = scales_a.float().t().repeat_interleave(GROUP, dim=1)[:, :K]
    sb = scales_b.float().repeat_interleave(GROUP, dim=0)[:N].repeat_interleave(GROUP, dim=1)[:, :K]
    c = (a.float() * sa) @ (b.float() * sb).t()
    return c.to(out_dtype or torch.float32)


def quantize_fp8_per_tensor(x):
    """x -> (e4m3 tensor, fp32 scale of shape (1,)) with x ~ q * scale."""
    import torch
    scale = (x.abs().amax().float() / 448.0).clamp_min(1e-12).reshape(1)
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


def quantize_fp8_activations(x):
    """x (M, K) -> (e4m3 tensor, fp32 scales (ceil(K/128), M)): one scale per 1x128 (row, k-block), stored
    k-major as `fp8_matmul_blockscaled` takes them."""
    q, scales = quantize_fp8_blocks(x, 1)
    return q, scales.t().contiguous()


def quantize_fp8_blocks(x, rows: int):
    """x (R, C) -> (e4m3 tensor, fp32 scales (ceil(R/rows), ceil(C/128))): one scale per rows x 128 block
    (rows=1: DeepSeek's activations; rows=128: its weights)."""
    import torch
    R, C = x.shape
    pr, pc = -R % rows, -C % GROUP
    xp = torch.nn.functional.pad(x.float(), (0, pc, 0, pr))
    blocks = xp.view((R + pr) // rows, rows, (C + pc) // GROUP, GROUP)
    scales = (blocks.abs().amax(dim=(1, 3)) / 448.0).clamp_min(1e-12)
    q = (blocks / scales[:, None, :, None]).to(torch.float8_e4m3fn).view(R + pr, C + pc)[:R, :C].contiguous()
    return q, scales

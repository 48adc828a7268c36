"""GEMM kernels: tiled, pipelined GEMM; GEMM + bias + GELU epilogue; split-K with atomics."""
import tilecraft as tilelang
import tilecraft.language as T


@tilelang.jit(out_idx=[-1])
def matmul(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128, block_K: int = 32,
           num_stages: int = 3, threads: int = 128, trans_A: bool = False, trans_B: bool = False,
           dtype: str = "float16", accum_dtype: str = "float", use_swizzle: bool = True):
    A_shape = (K, M) if trans_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    A_tile = (block_K, block_M) if trans_A else (block_M, block_K)
    B_tile = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def main(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared(A_tile, dtype)
            B_shared = T.alloc_shared(B_tile, dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(panel_size=10, enable=use_swizzle)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A[ko * block_K, by * block_M], A_shared)
                else:
                    T.copy(A[by * block_M, ko * block_K], A_shared)
                if trans_B:
                    T.copy(B[bx * block_N, ko * block_K], B_shared)
                else:
                    T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_A=trans_A, transpose_B=trans_B)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


# fast math: the GELU's tanh becomes one MUFU.TANH (tanh.approx.f32, absolute error ~2^-11 of 0.5|x|, below the
# fp16 output's own rounding); on the H200 the accurate forms made the epilogue cost a third of the kernel
# (0.75x addmm + gelu, 1.02x with fast math, 2026-11-30).  Blocks walk the grid in panels of 10 rows
# (T.use_swizzle), as the plain GEMM does: without it the same tile ran 8% slower (s9 gelu_epilogue_probe).
@tilelang.jit(out_idx=[-1], pass_configs={"tl.enable_fast_math": True})
def matmul_bias_gelu(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128,
                     block_K: int = 32, num_stages: int = 3, threads: int = 128,
                     dtype: str = "float16", accum_dtype: str = "float"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), Bias: T.Tensor((N,), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            Bias_shared = T.alloc_shared((block_N,), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(panel_size=10)
            T.clear(C_local)
            T.copy(Bias[bx * block_N], Bias_shared)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                x = C_local[i, j] + Bias_shared[j]
                # the tanh form of GELU (torch's approximate="tanh")
                C_local[i, j] = 0.5 * x * (1.0 + T.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


@tilelang.jit  # no out_idx: the caller passes a zeroed C that the blocks accumulate into
def splitk_matmul(M: int, N: int, K: int, split_k: int = 4, block_M: int = 64, block_N: int = 64,
                  block_K: int = 32, num_stages: int = 2, threads: int = 128,
                  dtype: str = "float16", out_dtype: str = "float32"):
    splitK = K // split_k

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(splitK, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, bz * splitK + ko * block_K], A_shared)
                T.copy(B[bz * splitK + ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                T.atomic_add(C[by * block_M + i, bx * block_N + j], C_local[i, j])
    return main


def ref_matmul(a, b, trans_A=False, trans_B=False):
    a = a.t() if trans_A else a
    b = b.t() if trans_B else b
    return (a.float() @ b.float()).to(a.dtype)


def ref_matmul_bias_gelu(a, b, bias):
    import torch.nn.functional as F
    return F.gelu(a.float() @ b.float() + bias.float(), approximate="tanh").to(a.dtype)

"""Row-wise reductions: softmax and RMSNorm."""
import tilecraft as tilelang
import tilecraft.language as T

LOG2E = 1.4426950408889634


@tilelang.jit(out_idx=[-1])
def softmax(M: int, N: int, block_M: int = 4, threads: int = 128, dtype: str = "float16",
            accum_dtype: str = "float"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            X_local = T.alloc_fragment((block_M, N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(X[bx * block_M, 0], X_local)
            T.reduce_max(X_local, row_max, dim=1, clear=True)
            for i, j in T.Parallel(block_M, N):  # exp(x - max) as exp2 with log2(e) folded in
                X_local[i, j] = T.exp2(X_local[i, j] * LOG2E - row_max[i] * LOG2E)
            T.reduce_sum(X_local, row_sum, dim=1)
            for i in T.Parallel(block_M):  # one division per row, multiplications per element
                row_sum[i] = 1.0 / row_sum[i]
            for i, j in T.Parallel(block_M, N):
                X_local[i, j] = X_local[i, j] * row_sum[i]
            T.copy(X_local, Y[bx * block_M, 0])
    return main


@tilelang.jit(out_idx=[-1])
def rmsnorm(M: int, N: int, block_M: int = 2, threads: int = 256, eps: float = 1e-6,
            dtype: str = "bfloat16", accum_dtype: str = "float"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            X_local = T.alloc_fragment((block_M, N), accum_dtype)
            X_sq = T.alloc_fragment((block_M, N), accum_dtype)
            ss = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(X[bx * block_M, 0], X_local)
            for i, j in T.Parallel(block_M, N):
                X_sq[i, j] = X_local[i, j] * X_local[i, j]
            T.reduce_sum(X_sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                X_local[i, j] = X_local[i, j] * ss[i] * W[j]
            T.copy(X_local, Y[bx * block_M, 0])
    return main


def ref_softmax(x):
    return x.float().softmax(-1).to(x.dtype)


def ref_rmsnorm(x, w, eps=1e-6):
    import torch
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)

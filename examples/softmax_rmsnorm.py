"""Row-wise reductions: fused softmax and RMSNorm, checked against torch.
    python examples/softmax_rmsnorm.py
"""
import torch

import tilecraft as tilelang
import tilecraft.language as T

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@tilelang.jit(out_idx=[-1])
def softmax(M, N, block_M=4, threads=128, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            X_shared = T.alloc_shared((block_M, N), dtype)
            X_local = T.alloc_fragment((block_M, N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(X[bx * block_M, 0], X_shared)
            T.copy(X_shared, X_local)
            T.reduce_max(X_local, row_max, dim=1, clear=True)
            for i, j in T.Parallel(block_M, N):
                X_local[i, j] = T.exp(X_local[i, j] - row_max[i])
            T.reduce_sum(X_local, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                X_local[i, j] = X_local[i, j] / row_sum[i]
            T.copy(X_local, Y[bx * block_M, 0])
    return main


@tilelang.jit(out_idx=[-1])
def rmsnorm(M, N, block_M=2, eps=1e-6, dtype="bfloat16", accum_dtype="float"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=256) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            sq = T.alloc_fragment((block_M, N), accum_dtype)
            ss = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * ss[i] * W[j]
            T.copy(x, Y[bx * block_M, 0])
    return main


def main():
    M, N = 37, 1000
    x = torch.randn(M, N, device=DEVICE, dtype=torch.float16) * 3
    y = softmax(M, N)(x)
    torch.testing.assert_close(y, torch.softmax(x.float(), dim=-1).half(), rtol=1e-2, atol=1e-3)
    print(f"softmax {M}x{N}: OK")

    M, N = 37, 300
    x = torch.randn(M, N, device=DEVICE, dtype=torch.bfloat16)
    w = torch.randn(N, device=DEVICE, dtype=torch.bfloat16)
    y = rmsnorm(M, N)(x, w)
    xf = x.float()
    ref = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).bfloat16()
    torch.testing.assert_close(y, ref, rtol=2e-2, atol=2e-2)
    print(f"rmsnorm {M}x{N} bf16: OK")


if __name__ == "__main__":
    main()

"""Quickstart: a vector add and a tiled GEMM, written exactly as for TileLang.

Runs on the GPU when one is present, otherwise on the CPU target.
    python examples/quickstart.py
"""
import torch

import tilecraft as tilelang
import tilecraft.language as T

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@tilelang.jit(out_idx=[-1])
def vector_add(N, block_N=256, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), threads=256) as bx:
            for i in T.Parallel(block_N):
                C[bx * block_N + i] = A[bx * block_N + i] + B[bx * block_N + i]
    return main


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=64, block_N=64, block_K=32, num_stages=2, threads=128,
           dtype="float16", accum_dtype="float"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


def main():
    n = 10_000
    add = vector_add(n)
    a = torch.randn(n, device=DEVICE)
    b = torch.randn(n, device=DEVICE)
    torch.testing.assert_close(add(a, b), a + b)
    print(f"vector_add    N={n}: OK")

    M, N, K = 200, 136, 96
    kernel = matmul(M, N, K)
    a = torch.randn(M, K, device=DEVICE, dtype=torch.float16)
    b = torch.randn(K, N, device=DEVICE, dtype=torch.float16)
    c = kernel(a, b)
    ref = (a.float() @ b.float()).half()
    torch.testing.assert_close(c, ref, rtol=1e-2, atol=1e-2)
    profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    profiler.assert_allclose(lambda x, y: x @ y, rtol=1e-2, atol=1e-2)
    ms = profiler.do_bench(warmup=2, rep=10)
    print(f"matmul        {M}x{N}x{K}: OK ({ms:.3f} ms)")
    print("quickstart: all checks passed")


if __name__ == "__main__":
    main()

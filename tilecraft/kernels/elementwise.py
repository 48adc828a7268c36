"""Element-wise kernels: vector add and 2-D axpby."""
import tilecraft as tilelang
import tilecraft.language as T


@tilelang.jit(out_idx=[-1])
def vector_add(N: int, block_N: int = 1024, threads: int = 256, dtype: str = "float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            for i in T.Parallel(block_N):
                C[bx * block_N + i] = A[bx * block_N + i] + B[bx * block_N + i]
    return main


@tilelang.jit(out_idx=[-1])
def axpby(M: int, N: int, alpha: float = 2.0, beta: float = -0.5, block_M: int = 32,
          block_N: int = 256, threads: int = 256, dtype: str = "float16"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), Z: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                Z[by * block_M + i, bx * block_N + j] = (
                    alpha * X[by * block_M + i, bx * block_N + j] + beta * Y[by * block_M + i, bx * block_N + j])
    return main


def ref_vector_add(a, b):
    return a + b


def ref_axpby(x, y, alpha=2.0, beta=-0.5):
    return (alpha * x.float() + beta * y.float()).to(x.dtype)

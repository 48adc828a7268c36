"""Grouped GEMM epilogue variants (probe)."""
import tilecraft as tilelang
import tilecraft.language as T


def grouped_variant(total_M, N, K, groups, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256,
                    dtype="bfloat16", accum_dtype="float", variant="old", trans_B=True):
    max_tiles = -(-total_M // block_M) + groups

    @T.prim_func
    def main(A: T.Tensor((total_M, K), dtype), B: T.Tensor((groups, N, K) if trans_B else (groups, K, N), dtype),
             Offsets: T.Tensor((groups + 1,), "int32"), Tile_offsets: T.Tensor((groups + 1,), "int32"),
             C: T.Tensor((total_M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), max_tiles, threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K) if trans_B else (block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_shared = T.alloc_shared((block_M, block_N + (8 if variant == "pad" else 0)), dtype)
            g = T.alloc_var("int32")
            g = 0
            for i in T.serial(groups - 1):
                if Tile_offsets[i + 1] <= by:
                    g = i + 1
            valid = by < Tile_offsets[groups]
            row0 = Offsets[g] + (by - Tile_offsets[g]) * block_M
            row_end = Offsets[g + 1]
            T.clear(C_local)
            for ko in T.Pipelined(T.if_then_else(valid, T.ceildiv(K, block_K), 0), num_stages=num_stages):
                T.copy(A[row0, ko * block_K], A_shared)
                if trans_B:
                    T.copy(B[g, bx * block_N, ko * block_K], B_shared)
                else:
                    T.copy(B[g, ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=trans_B)
            if variant == "old":
                T.copy(C_local, C_shared)
                for i, j in T.Parallel(block_M, block_N):
                    if valid and row0 + i < row_end and bx * block_N + j < N:
                        C[row0 + i, bx * block_N + j] = C_shared[i, j]
            elif variant == "full_direct":
                if valid and row0 + block_M <= row_end:
                    T.copy(C_local, C[row0, bx * block_N])
                else:
                    T.copy(C_local, C_shared)
                    for i, j in T.Parallel(block_M, block_N):
                        if valid and row0 + i < row_end and bx * block_N + j < N:
                            C[row0 + i, bx * block_N + j] = C_shared[i, j]
            elif variant == "pad":   # rows 16 bytes longer: the fragment's 4-byte stores leave the 8-way conflicts
                T.copy(C_local, C_shared[0:block_M, 0:block_N])
                if valid and row0 + block_M <= row_end:
                    T.copy(C_shared[0:block_M, 0:block_N], C[row0, bx * block_N])
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        if valid and row0 + i < row_end and bx * block_N + j < N:
                            C[row0 + i, bx * block_N + j] = C_shared[i, j]
            elif variant == "shared_copy":
                T.copy(C_local, C_shared)
                if valid and row0 + block_M <= row_end:
                    T.copy(C_shared, C[row0, bx * block_N])
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        if valid and row0 + i < row_end and bx * block_N + j < N:
                            C[row0 + i, bx * block_N + j] = C_shared[i, j]
            elif variant == "row_guard":   # N % block_N == 0 assumed by the caller: the guard is per row
                T.copy(C_local, C_shared)
                for i, j in T.Parallel(block_M, block_N):
                    if valid and row0 + i < row_end:
                        C[row0 + i, bx * block_N + j] = C_shared[i, j]
    return main


def compile_variant(variant, total_M, N, K, groups, target="cuda -arch=sm_90a", **kw):
    return tilelang.compile(grouped_variant(total_M, N, K, groups, variant=variant, **kw), target=target)

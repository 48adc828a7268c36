"""stage_epilogue on the guarded element store that ends TileLang's grouped-GEMM and MoE programs
(`for i, j in T.Parallel: if i < rows: C[r + i, c + j] = acc[i, j]`): staged through a padded shared
tile, whole tiles leaving by one 16-byte-store copy and a group's last tile element by element.

Run through the CUDA lowering on the CPU (tc.cpu_threads: each thread's code, the shared tile starting
as 0xFF bytes) and on the plain CPU target, against torch, with ragged groups (empty, one row, a tile
and one, N past the last column tile); the generated CUDA for sm_80 and sm_90a holds the staged form
only where the pattern matches."""
from __future__ import annotations

import pytest
import torch

import tilecraft
import tilecraft.language as T


def grouped(total_M, N, K, groups, block_M=64, block_N=64, block_K=32, threads=128, value="plain",
            guard="rows"):
    """A grouped GEMM written as TileLang's examples are: the group found by a scan, a guarded store."""
    max_tiles = -(-total_M // block_M) + groups

    @T.prim_func
    def main(A: T.Tensor((total_M, K), "float16"), B: T.Tensor((groups, K, N), "float16"),
             Offsets: T.Tensor((groups + 1,), "int32"), Tile_offsets: T.Tensor((groups + 1,), "int32"),
             W: T.Tensor((total_M,), "float32"), C: T.Tensor((total_M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), max_tiles, threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float16")
            B_shared = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            g = T.alloc_var("int32")
            g = 0
            for i in T.serial(groups - 1):
                if Tile_offsets[i + 1] <= by:
                    g = i + 1
            valid = by < Tile_offsets[groups]
            row0 = Offsets[g] + (by - Tile_offsets[g]) * block_M
            rows = T.max(0, T.min(block_M, Offsets[g + 1] - row0))
            T.clear(acc)
            for ko in T.Pipelined(T.if_then_else(valid, T.ceildiv(K, block_K), 0), num_stages=2):
                T.copy(A[row0, ko * block_K], A_shared)
                T.copy(B[g, ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, acc)
            for i, j in T.Parallel(block_M, block_N):
                if guard == "rows":
                    if i < rows:
                        if value == "plain":
                            C[row0 + i, bx * block_N + j] = acc[i, j]
                        else:   # a per-row weight read from global memory (MoE's routed weights)
                            C[row0 + i, bx * block_N + j] = acc[i, j] * W[row0 + i]
                elif guard == "rows_cols":
                    if i < rows and bx * block_N + j < N:
                        C[row0 + i, bx * block_N + j] = acc[i, j]
                else:   # a guard this staging does not follow: stored as written
                    if i < rows and (i + j) % 3 != 1:
                        C[row0 + i, bx * block_N + j] = acc[i, j]
    return main


def reference(a, b, w, offsets, value, guard):
    out = torch.full((a.shape[0], b.shape[2]), float("nan"))
    for g in range(b.shape[0]):
        lo, hi = int(offsets[g]), int(offsets[g + 1])
        r = a[lo:hi].float() @ b[g].float()
        if value == "weighted":
            r = r * w[lo:hi, None]
        out[lo:hi] = r
    if guard == "other":   # i, j: the element's row and column within its 64x64 tile
        i = torch.empty(out.shape[0], dtype=torch.long)
        for g in range(b.shape[0]):
            lo, hi = int(offsets[g]), int(offsets[g + 1])
            i[lo:hi] = torch.arange(hi - lo) % 64
        j = torch.arange(out.shape[1]) % 64
        out[(i[:, None] + j[None, :]) % 3 == 1] = float("nan")
    return out


def inputs(sizes, guard, K=64):
    """A, B, the group row offsets, the prefix sums of each group's 64-row tiles, the per-row weights."""
    N = 136 if guard == "rows_cols" else 128
    torch.manual_seed(len(sizes))
    offsets = torch.tensor([0] + torch.tensor(sizes).cumsum(0).tolist(), dtype=torch.int32)
    tiles = torch.tensor([0] + ((torch.tensor(sizes) + 63) // 64).cumsum(0).tolist(), dtype=torch.int32)
    a = torch.randn(int(offsets[-1]), K).half()
    b = torch.randn(len(sizes), K, N).half()
    return a, b, offsets, tiles, torch.rand(a.shape[0]) + 0.5


CASES = [("plain", "rows", [130, 0, 1, 64]), ("weighted", "rows", [64, 100, 3]),
         ("plain", "rows_cols", [200, 57]), ("plain", "other", [70, 64])]


@pytest.mark.parametrize("value,guard,sizes", CASES)
@pytest.mark.parametrize("threads_mode", [False, True], ids=["cpu", "cpu_threads"])
def test_grouped_store_matches_torch(value, guard, sizes, threads_mode):
    a, b, offsets, tiles, w = inputs(sizes, guard)
    N = b.shape[2]
    fn = grouped(a.shape[0], N, b.shape[1], len(sizes), value=value, guard=guard)
    kern = tilecraft.compile(fn, target="cpu", pass_configs={"tc.cpu_threads": threads_mode})
    c = torch.full((a.shape[0], N), float("nan")).half()
    kern(a, b, offsets, tiles, w, c)
    torch.testing.assert_close(c.float(), reference(a, b, w, offsets, value, guard), rtol=2e-3, atol=2e-2,
                               equal_nan=True)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("value,guard,staged", [("plain", "rows", True), ("weighted", "rows", True),
                                                ("plain", "rows_cols", True), ("plain", "other", False)])
def test_the_cuda_source_stages_where_the_pattern_matches(arch, value, guard, staged):
    fn = grouped(1024, 256, 128, 4, block_M=128, block_N=128, threads=256, value=value, guard=guard)
    src = tilecraft.compile(fn, target={"kind": "cuda", "arch": arch}).get_kernel_source()
    assert ("C_stage" in src) == staged
    if staged:   # the whole tile: one branch of 16-byte stores from the stage to C
        assert "(127 < rows)" in src and "vec_store<tc::half_t, tc::half_t, 8>((&C[" in src, src
    off = tilecraft.compile(fn, target={"kind": "cuda", "arch": arch},
                            pass_configs={"tc.stage_epilogue": False}).get_kernel_source()
    assert "C_stage" not in off


@pytest.mark.gpu
@pytest.mark.parametrize("value,guard,sizes", CASES + [("weighted", "rows", [1000, 0, 129, 300])])
def test_grouped_store_matches_torch_on_the_gpu(value, guard, sizes):
    """The staged form run by the GPU's threads (the test above runs it only as source here: on the CPU
    target, without tensor cores, the gemm has no accumulator layout to stage)."""
    a, b, offsets, tiles, w = inputs(sizes, guard)
    N = b.shape[2]
    kern = tilecraft.compile(grouped(a.shape[0], N, b.shape[1], len(sizes), value=value, guard=guard), target="cuda")
    assert ("C_stage" in kern.get_kernel_source()) == (guard != "other")
    dev = [t.cuda() for t in (a, b, offsets, tiles, w)]
    c = torch.full((a.shape[0], N), float("nan"), device="cuda").half()
    kern(*dev, c)
    torch.testing.assert_close(c.float().cpu(), reference(a, b, w, offsets, value, guard), rtol=2e-3, atol=2e-2,
                               equal_nan=True)

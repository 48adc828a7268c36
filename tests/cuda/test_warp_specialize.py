"""Warp specialization on sm_90a without a GPU (transform/pipelining/warp_specialized.py): the register budgets and
ring depth of the two-blocks-per-SM split, and the fallback to the unsplit loop (its plan note, its launch).
The split's generated kernels run in the GPU tier (tests/gpu/test_widen_k_tiles_gpu.py, the sanitizer set)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.transform.pipelining.warp_specialized import register_budgets, two_block_ring

SM90 = {"kind": "cuda", "arch": "sm_90a"}


def test_register_budgets():
    assert register_budgets(128) == (0, 0)           # one consumer warpgroup alone on its SM: 255 already
    assert register_budgets(256) == (24, 240)        # 384 threads: 168 each at launch, 24 + 2 x 240 <= 3 x 168
    assert register_budgets(128, 2) == (24, 232)     # two blocks of 256: 128 each, 24 + 232 = 2 x 128


@pytest.mark.parametrize("args,depth", [
    ((128, 128, 16384, 3, 0), 4),          # the README's tile: 3 stages of 16 KB deepened to 4
    ((128, 128, 16384, 6, 0), 6),          # a deeper ring stays as written
    ((128, 128, 32768, 3, 0), 0),          # 4 x 32 KB: no room for a second block
    ((128, 128, 16384, 3, 60 * 1024), 0),  # 60 KB of other tiles beside the ring: no room either
    ((128, 64, 16384, 3, 0), 0),           # smaller accumulators keep more blocks unsplit (not measured split)
    ((256, 128, 16384, 3, 0), 0),          # two consumer warpgroups: the one-block split's business
])
def test_two_block_ring(args, depth):
    assert two_block_ring(*args) == depth


@pytest.mark.parametrize("threads,configs", [(128, None), (256, {"tc.warp_specialize": True})],
                         ids=["two-block auto", "one-block forced"])
def test_a_split_that_falls_back_says_so(threads, configs):
    """A loop whose loads need a value the kernel computes before it (here a row offset read from a shared
    tile) stays unsplit (plan_pipelines.split_placeable): its plan says why and does not claim the
    two-block launch it did not get; the kernel launches the program's threads.  (This fallback raised an
    internal compiler error before session 10: the split pointed one past its loop's plan note.)"""
    M = N = K = 512

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=threads) as (bx, by):
            A_s = T.alloc_shared((128, 32), "float16")
            B_s = T.alloc_shared((32, 128), "float16")
            rows = T.alloc_shared((1,), "int32")
            C_f = T.alloc_fragment((128, 128), "float32")
            rows[0] = by * 128
            row = rows[0]
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, 32), num_stages=3):
                T.copy(A[row, ko * 32], A_s)
                T.copy(B[ko * 32, bx * 128], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 128, bx * 128])

    k = tilelang.compile(main, out_idx=[-1], target=SM90, pass_configs=configs)
    plan = k.get_plan()
    assert "not warp-specialized: the loads need values the kernel computes" in plan, plan
    assert "two blocks per SM" not in plan and k.artifact.meta["block"][0] == threads, plan
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    got = tilelang.compile(main, out_idx=[-1], target="cpu")(a, b).float()
    assert ((got - a.float() @ b.float()).norm() / (a.float() @ b.float()).norm()).item() < 2e-3


def var_indexed_weights(M=2048, N=2048, K=512, G=4):
    """A block picks its weight matrix B[g] with a T.alloc_var found before the loop (a grouped GEMM's
    group): the copy of B's tile is a pipeline producer indexed by an on-chip scalar."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((G, N, K), "float16"), Sel: T.Tensor((G,), "int32"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // 128, M // 128, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((128, 64), "float16")
            C_l = T.alloc_fragment((128, 128), "float")
            g = T.alloc_var("int32")
            g = 0
            for i in T.serial(G - 1):
                if Sel[i + 1] <= by:
                    g = i + 1
            T.clear(C_l)
            for ko in T.Pipelined(K // 64, num_stages=3):
                T.copy(A[by * 128, ko * 64], A_s)
                T.copy(B[g, bx * 128, ko * 64], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * 128, bx * 128])
    return main


@pytest.mark.parametrize("configs", [{"tc.warp_specialize": True}, {"tc.persistent_tiles": True}],
                         ids=["ws forced", "persistent forced"])
def test_a_tile_indexed_by_a_scalar_found_before_the_loop_loads_ahead_but_is_neither_split_nor_walked(configs):
    """The B tile loads ahead by TMA (its index is loop-invariant), but no producer warpgroup (the statements
    that find g run in the consumer branch only: the producer would read g unset) and no persistent walk
    (the next tile's first loads are issued with this tile's g) -- either would be a silent wrong answer."""
    k = tilelang.compile(var_indexed_weights(), out_idx=[-1], target=SM90, pass_configs=configs)
    plan, src = k.get_plan(), k.get_kernel_source()
    assert "tma_load_tile((&B_s[" in src, src
    assert "warp-specialized: a producer" not in plan and "tile_it" not in src, plan
    assert k.artifact.meta["grid"][:2] == [16, 16], k.artifact.meta["grid"]   # one block a tile (256 > 132 SMs)


def test_the_scalar_indexed_program_on_the_cpu_target():
    M, N, K, G = 512, 256, 128, 4
    sel = torch.tensor([0, 1, 2, 3], dtype=torch.int32)   # block-row by takes group min(by, 3)
    a, b = torch.randn(M, K).half(), torch.randn(G, N, K).half()
    c = tilelang.compile(var_indexed_weights(M, N, K, G), out_idx=[-1], target="cpu")(a, b, sel).float()
    ref = torch.cat([a[r * 128:(r + 1) * 128].float() @ b[min(r, 3)].float().t() for r in range(M // 128)])
    assert ((c - ref).norm() / ref.norm()).item() < 2e-3

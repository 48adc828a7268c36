"""Compile-side validation (transform/validate/) for CUDA targets: programs that used to loop in the
device compiler or in layout/TMA planning, or crash a pass, are refused at once at their line with
the number that is over; and the reference kernels compile for every architecture in target.ARCHS."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft
import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.kernels import attention, gemm
from tilecraft.target import ARCHS

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "language"))
from errcheck import check_error  # noqa: E402

HERE = os.path.abspath(__file__)


def gemm_epilogue(threads=128, block_M=64):
    @T.prim_func
    def main(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
             C: T.Tensor((256, 256), "float16")):
        with T.Kernel(4, T.ceildiv(256, block_M), threads=threads) as (bx, by):  # err:gemm-kernel
            A_s = T.alloc_shared((block_M, 32), "float16")  # err:gemm-a-tile
            B_s = T.alloc_shared((32, 64), "float16")
            C_f = T.alloc_fragment((block_M, 64), "float32")
            T.clear(C_f)
            for k in T.Pipelined(8, num_stages=2):
                T.copy(A[by * block_M, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_f)
            for i, j in T.Parallel(block_M, 64):
                C_f[i, j] = T.max(C_f[i, j], 0.0)
            T.copy(C_f, C[by * block_M, bx * 64])
    return main


@pytest.mark.parametrize("threads", [1, 33, 100])
def test_threads_not_whole_warps_are_refused_at_once(threads):
    with pytest.raises(tilecraft.TilecraftError) as ei:
        tilelang.compile(gemm_epilogue(threads), target="sm_80")
    check_error(ei.value, HERE, "gemm-kernel", rf"threads={threads}", r"T\.gemm", r"multiple of 32")


@pytest.mark.parametrize("threads", [1, 33, 100])
def test_flash_attention_with_partial_warps_is_refused(threads):
    with pytest.raises(tilecraft.TilecraftError, match=rf"threads={threads}.*multiple of 32"):
        tilelang.compile(attention.flash_attention.fn(1, 2, 256, 64, threads=threads), target="sm_90a")


@pytest.mark.parametrize("block_M", [65536, 2**31])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_huge_tiles_are_refused_before_planning(arch, block_M):
    with pytest.raises(tilecraft.TilecraftError) as ei:
        tilelang.compile(gemm_epilogue(128, block_M), target=arch)
    # at the tile that does not fit (its allocation), not the kernel's line
    check_error(ei.value, HERE, "gemm-a-tile", r"bytes of shared memory", r"A_s", str(block_M))


def replicated_fragment():
    @T.prim_func
    def main(X: T.Tensor((256, 64), "float32"), Y: T.Tensor((256,), "float32")):
        with T.Kernel(4, threads=128) as bx:
            x_f = T.alloc_fragment((64, 64), "float32")
            r = T.alloc_fragment((64,), "float32")
            T.copy(X[bx * 64, 0], x_f)
            T.reduce_sum(x_f, r, dim=1)
            x_f[0, 0] = x_f[0, 0] ** 2  # err:replicated
            r[0] = x_f[0, 0]
            T.copy(r, Y[bx * 64])
    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_fragment_every_thread_would_hold_whole_is_over_the_budget(arch):
    with pytest.raises(tilecraft.TilecraftError) as ei:
        tilelang.compile(replicated_fragment(), target=arch)
    check_error(ei.value, HERE, "replicated", r"4160 32-bit registers per thread", r"budget of 2048",
                r"x_f \(64, 64\) is accessed outside every T\.Parallel loop")


def symbolic_parallel():
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(n):  # err:symbolic-parallel
                Y[i] = X[i] * 2.0
    return main


def test_a_run_time_parallel_extent_is_refused_on_cuda():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        tilelang.compile(symbolic_parallel(), target="sm_80")
    check_error(ei.value, HERE, "symbolic-parallel", r"on CUDA a T\.Parallel extent must be a compile-time constant")


def big_grid():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32")):
        with T.Kernel(1, 70000, threads=32) as (bx, by):  # err:grid-y
            X[0] = 1.0
    return main


def test_grid_dimensions_within_cudas_limits():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        tilelang.compile(big_grid(), target="sm_80")
    check_error(ei.value, HERE, "grid-y", r"grid dimension y is 70000", r"65535")


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_reference_gemm_and_flash_attention_compile_for_every_listed_arch(arch):
    """The README's GEMM (128x128x32, 3 stages) and FlashAttention: each architecture takes the best
    path it has; sm_100a / sm_120 take mma.sync (no Blackwell path yet) and the plan says so."""
    for func in (gemm.matmul.fn(512, 512, 512, block_M=128, block_N=128, block_K=32, num_stages=3),
                 attention.flash_attention.fn(1, 2, 256, 64)):
        k = tilelang.compile(func, out_idx=[-1], target={"kind": "cuda", "arch": arch})
        assert k.artifact.binary[:4] == b"\x7fELF"
        plan = "\n".join(k.get_plan()) if not isinstance(k.get_plan(), str) else k.get_plan()
        if arch in ("sm_100a", "sm_120"):
            assert "mma.sync" in plan and "no Blackwell" in plan, plan
        elif arch == "sm_90a":
            assert "wgmma" in plan, plan
        else:
            assert "mma.sync" in plan, plan

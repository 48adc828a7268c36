"""A loop whose next iteration starts with two copies, the second into a tile that the end of the
iteration still reads: the barrier at the end of the body must be there although the first copy
alone (into another tile) would not need it.  insert_syncs compared the end of an iteration with
the first statement of the next only, and left this race (found while adding T.view, session 6).
CPU reference here; the structure compiled for sm_80 / sm_90a; a GPU run in
tests/gpu/test_loop_carried_sync_gpu.py."""
from __future__ import annotations

import re

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


def copy_then_reread(M=64, N=64, iters=3):
    """Out += A_s[it] * 2 (through B_s's bytes reused as scratch) for each it."""
    @T.prim_func
    def main(A: T.Tensor((iters, M, N), "float32"), B: T.Tensor((iters, M, N), "float32"),
             Out: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, N), "float32")
            B_s = T.alloc_shared((M, N), "float32")
            for it in T.serial(iters):
                T.copy(A[it, 0, 0], A_s)
                T.copy(B[it, 0, 0], B_s)
                for i, j in T.Parallel(M, N):
                    B_s[i, j] = A_s[(i + 1) % M, j] + B_s[i, j] * 2.0
                for i, j in T.Parallel(M, N):
                    T.atomic_add(Out[i, j], B_s[(i + 3) % M, j])
    return main


def reference(a, b):
    s = a.roll(-1, dims=1) + b * 2
    return s.roll(-3, dims=1).sum(0)


def check(k, device="cpu"):
    a, b = torch.randn(3, 64, 64, device=device), torch.randn(3, 64, 64, device=device)
    out = torch.zeros(64, 64, device=device)
    k(a, b, out)
    torch.testing.assert_close(out, reference(a, b), rtol=1e-5, atol=1e-5)


def test_on_the_cpu_target():
    check(tilelang.compile(copy_then_reread(), target="cpu"))


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_iteration_ends_with_a_barrier(arch):
    src = tilelang.compile(copy_then_reread(), target={"kind": "cuda", "arch": arch}).get_kernel_source()
    loop = src[src.index("for (int it"):]
    # the last statement of the loop body, after the atomics' loop: a block barrier
    assert re.search(r"atomic_add[^\n]*\n\s*\}\n\s*__syncthreads\(\);\n\s*\}", loop), loop

"""Python's assignment semantics inside kernels:
- `a[0], a[1] = a[1], a[0]` evaluates every right-hand value before any store (TileLang's own 2:4
  sparse compressor swaps indices this way: stored one after the other, both got a[1]'s value,
  and whole rows of the sparse GEMM came out wrong wherever a group held one nonzero);
- `x = y` of two `T.alloc_var` scalars copies the value; it does not make x a second name for y.
CPU target against expected values; the same kernels compile for sm_80 / sm_90a."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


def swaps():
    @T.prim_func
    def main(A: T.Tensor((6,), "int32"), B: T.Tensor((6,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            loc = T.alloc_local((6,), "int32")
            for i in T.serial(6):
                loc[i] = A[i]
            loc[0], loc[1] = loc[1], loc[0]                  # swap
            loc[2], loc[3] = loc[3] + 10, loc[2] + 100       # expressions of each other
            loc[4], loc[5], loc[0] = loc[0], loc[4], loc[5]  # a rotation through three slots
            for i in T.serial(6):
                B[i] = loc[i]
    return main


def var_copies():
    @T.prim_func
    def main(A: T.Tensor((2,), "int32"), B: T.Tensor((5,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            x = T.alloc_var("int32")
            y = T.alloc_var("int32")
            x = A[0]
            y = A[1]
            x, y = y, x          # swap two scalars
            B[0] = x
            B[1] = y
            x = y                # a copy of y's value ...
            x += 5               # ... so y keeps its own
            B[2] = x
            B[3] = y
            z = T.alloc_var("int32")   # a fresh scalar is a new name, not a copy
            z = 7
            B[4] = z + y
    return main


def _run(func, n_in, n_out, a):
    k = tilelang.compile(func, out_idx=[1], target="cpu")
    return k(torch.tensor(a, dtype=torch.int32)).tolist()


def test_unpacking_reads_before_it_stores():
    # loc = [1..6] -> swap [2,1,3,4,5,6] -> [2,1,14,103,5,6] -> loc4=loc0(2), loc5=loc4(5), loc0=loc5(6)
    assert _run(swaps(), 6, 6, [1, 2, 3, 4, 5, 6]) == [6, 1, 14, 103, 2, 5]


def test_var_assignment_copies_the_value():
    assert _run(var_copies(), 2, 5, [1, 2]) == [2, 1, 6, 1, 8]


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_compiles_for_cuda(arch):
    for f in (swaps(), var_copies()):
        k = tilelang.compile(f, out_idx=[1], target={"kind": "cuda", "arch": arch})
        assert k.get_kernel_source()

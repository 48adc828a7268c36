"""An `if` on the thread index around tile work that is not whole warp groups is refused.

TileLang's mHC pre-block example (deepseek_mhc/example_mhc_pre.py) runs `if
T.get_thread_binding() < 32:` with T.Parallel loops in one branch and a pipelined copy into shared
memory in the other, in a block of 96 threads.  tilecraft spreads tile ops over a branch's own
threads only for whole warp groups; this `if` stayed an ordinary one, its tile ops were lowered for
all 96 threads, and the shares of the threads that take the other branch were never done (the
example's wrong answer on the H200, session 6).  Now it is an error at the `if`'s line.  Per-thread
work under such an `if` (a one-element atomic, plain stores) and whole-warp-group branches still
compile.  Compile-only (the CPU target has no thread index)."""
from __future__ import annotations

import pytest

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

ARCHS = ["sm_80", "sm_90a"]


def split_at_warp(split=32, threads=96, n=256):
    @T.prim_func
    def main(X: T.Tensor((4, n), "float32"), W: T.Tensor((4,), "float32"), Y: T.Tensor((n,), "float32"),
             P: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            w_s = T.alloc_shared((4,), "float32")
            T.copy(W, w_s)
            if T.get_thread_binding() < split:  # the refused line
                for j in T.Parallel(4):
                    P[j] = T.sigmoid(w_s[j])
            else:
                xs = T.alloc_shared((4, n), "float32")
                T.copy(X, xs)
                acc = T.alloc_fragment((n,), "float32")
                T.clear(acc)
                for h in T.serial(4):
                    for i in T.Parallel(n):
                        acc[i] += w_s[h] * xs[h, i]
                T.copy(acc, Y)
    return main


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_tile_work_in_a_warp_branch_is_refused_at_the_if(arch):
    with pytest.raises(TilecraftError, match=r"threads \[0, 32\) of the block's 96") as e:
        tilelang.compile(split_at_warp(), target={"kind": "cuda", "arch": arch})
    text = str(e.value)
    assert "test_partial_thread_branch.py" in text and "the refused line" in text, text


def per_thread_work(threads=128):
    @T.prim_func
    def main(X: T.Tensor((threads,), "float32"), Out: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((threads,), "float32")
            T.copy(X, s)
            if tx == 0:
                T.atomic_add(Out[0], s[5])
            if tx < 16:
                Out[1] = s[tx]
    return main


def whole_warp_groups(threads=256):
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            if tx < 128:
                T.copy(X, s)
                for i in T.Parallel(128):
                    Y[i] = s[i] * 2.0
    return main


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_per_thread_work_and_warp_group_branches_still_compile(arch):
    target = {"kind": "cuda", "arch": arch}
    assert "atomic" in tilelang.compile(per_thread_work(), target=target).get_kernel_source()
    assert "tc_tid >= 0 && tc_tid < 128" in tilelang.compile(whole_warp_groups(), target=target).get_kernel_source()

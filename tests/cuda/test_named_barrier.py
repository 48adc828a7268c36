"""`T.sync_threads(barrier_id, arrive_count)` (TileLang's named barrier) compiled for sm_90a without
a GPU: the generated code waits on that hardware barrier with that count (bar.sync id, count in
the PTX), a full-block count with id 0 stays __syncthreads, and bad ids / counts are errors.
The GPU run of the same kernel is tests/gpu/test_named_barrier_gpu.py."""
from __future__ import annotations

import pytest

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM90 = {"kind": "cuda", "arch": "sm_90a"}


def prefix_sum_first_warps(N=256, R=64):
    """Threads [0, R) compute an inclusive prefix sum of X[0:R] in shared memory (Hillis-Steele),
    synchronising only among themselves on barrier 3; everyone else copies X through."""
    steps = R.bit_length() - 1

    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((N,), "int32")  # only [0, R) is used
            v = T.alloc_var("int32")
            if tx < R:
                s[tx] = X[tx]
                for i in T.serial(steps):
                    T.sync_threads(3, R)
                    v = s[tx]
                    if tx >= (1 << i):
                        v = v + s[tx - (1 << i)]
                    T.sync_threads(3, R)
                    s[tx] = v
                Y[tx] = s[tx]
            else:
                Y[tx] = X[tx]
    return main


def test_named_barrier_prints_bar_sync_with_id_and_count():
    k = tilelang.compile(prefix_sum_first_warps(), out_idx=[-1], target=SM90)
    src = k.get_kernel_source()
    assert "tc::named_barrier_sync<3, 64>()" in src
    assert src.count("__syncthreads") == 0, "no block-wide barrier inside the branch of 64 threads"


def test_full_block_named_barrier_is_syncthreads():
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((128,), "float32")
            T.copy(X, s)
            T.sync_threads(0, 128)
            for i in T.Parallel(128):
                Y[i] = s[127 - i]
    src = tilelang.compile(main, out_idx=[-1], target=SM90).get_kernel_source()
    assert "named_barrier_sync" not in src and "__syncthreads" in src


@pytest.mark.parametrize("args", [(16, 64), (1, 48), (1, 512), (-1, 64)])
def test_bad_named_barrier_is_an_error(args):
    with pytest.raises(TilecraftError, match="barrier id must be an int in 0..15"):
        @T.prim_func
        def main(X: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=256) as bx:
                T.sync_threads(*args)

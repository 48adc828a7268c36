"""A program with several `T.Kernel` blocks (TileLang's split-K flash-decoding shape: a kernel that
writes partial results, then one that combines them): on the CPU target the kernels run in order
and match torch; on CUDA each becomes its own `__global__` function (own grid, threads, shared
memory) launched in program order (compiler/split_kernels.py).  The GPU run of the same programs
is tests/gpu/test_multi_kernel_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90a"}


def split_row_sum(M=96, N=1000, splits=4, block=64):
    """Partial[s, m] = sum of X[m, s*chunk:(s+1)*chunk] (kernel 1, splits x rows-blocks grid, 128
    threads, a shared tile); Y[m] = sum_s Partial[s, m] * scale (kernel 2, another grid and 64
    threads, reading the partials in the other order)."""
    chunk = T.ceildiv(N, splits)

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Partial: T.Tensor((splits, M), "float32"),
             Y: T.Tensor((M,), "float32")):
        with T.Kernel(splits, T.ceildiv(M, block), threads=128) as (bs, bm):
            tile = T.alloc_shared((block, chunk), "float32")
            acc = T.alloc_fragment((block,), "float32")
            T.copy(X[bm * block, bs * chunk], tile)
            T.reduce_sum(tile, acc, dim=1)
            T.copy(acc, Partial[bs, bm * block])
        with T.Kernel(T.ceildiv(M, 32), threads=64) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < M:
                    total = T.alloc_var("float32")
                    total = 0.0
                    for s in T.serial(splits):
                        total = total + Partial[splits - 1 - s, bx * 32 + i]
                    Y[bx * 32 + i] = total * 0.5
    return main


def _check(k, M=96, N=1000, device="cpu"):
    x = torch.randn(M, N, device=device)
    partial, y = k(x)
    torch.testing.assert_close(y, x.sum(1) * 0.5, rtol=1e-4, atol=1e-3)
    chunk = -(-N // partial.shape[0])
    torch.testing.assert_close(partial, torch.stack([x[:, s * chunk:(s + 1) * chunk].sum(1)
                                                     for s in range(partial.shape[0])]), rtol=1e-4, atol=1e-3)


def test_two_kernels_run_in_order_on_the_cpu_target():
    _check(tilelang.compile(split_row_sum(), out_idx=[1, 2], target="cpu"))


@pytest.mark.cuda_compile
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90a"])
def test_each_kernel_is_its_own_global_function(target):
    k = tilelang.compile(split_row_sum(), out_idx=[1, 2], target=target)
    src = k.get_kernel_source()
    assert src.count('extern "C" __global__') == 2
    assert "main_0_kernel" in src and "main_1_kernel" in src
    launchers = k._launch.launchers
    assert [tuple(l.grid_spec) for l in launchers] == [(4, 2, 1), (3, 1, 1)]
    assert [l.block for l in launchers] == [(128, 1, 1), (64, 1, 1)]
    assert launchers[0].smem > 0 and launchers[1].smem == 0, "each part plans its own shared memory"


@pytest.mark.cuda_compile
def test_statements_between_kernels_are_an_error_naming_the_line():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                Y[i] = X[i]
        Y[0] = 1.0
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                Y[i] = Y[i] + 1.0
    with pytest.raises(TilecraftError, match=r"3 T.Kernel|outside every T.Kernel") as e:
        tilelang.compile(main, out_idx=[1], target=SM90)
    assert "test_multi_kernel.py" in str(e.value)

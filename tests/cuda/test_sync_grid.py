"""`T.sync_grid()` at the top level of a kernel body: every block's writes before it are seen by every
block after it (the kernel is split into kernels launched in order; language/grid_sync.py).  A
persistent grid that writes partial sums, meets at the grid barrier and then combines them in another
block order, against torch on the CPU target; CUDA compiles both halves; on-chip values read across
the barrier and barriers inside loops are errors at the user's line.  GPU run:
tests/gpu/test_sync_grid_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError


def split_then_combine(R=24, C=256, blocks=5, bc=64):
    """Part[r, c // bc] = sum of a bc-wide chunk of row r (tiles visited persistently), grid barrier,
    then Y[r] = sum of Part[r, :] with the blocks taking rows in reverse."""
    nc = C // bc

    @T.prim_func
    def main(X: T.Tensor((R, C), "float32"), Part: T.Tensor((R, nc), "float32"), Y: T.Tensor((R,), "float32")):
        with T.Kernel(blocks, threads=64) as b:
            tile = T.alloc_fragment((bc,), "float32")
            s = T.alloc_fragment((1,), "float32")
            acc = T.alloc_var("float32")
            for w in T.serial(T.ceildiv(R * nc, blocks)):
                t = w * blocks + b
                if t < R * nc:
                    T.copy(X[t // nc, (t % nc) * bc], tile)
                    T.reduce_sum(tile, s, dim=0)
                    Part[t // nc, t % nc] = s[0]
            T.sync_grid()
            for w in T.serial(T.ceildiv(R, blocks)):
                r = R - 1 - (w * blocks + b)
                if r >= 0:
                    acc = 0.0
                    for c in T.serial(nc):
                        acc = acc + Part[r, c]
                    Y[r] = acc
    return main


def _check(k, R=24, C=256, device="cpu"):
    x = torch.randn(R, C, device=device)
    part, y = k(x)
    torch.testing.assert_close(part, x.view(R, -1, 64).sum(2), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(y, x.sum(1), rtol=1e-5, atol=1e-4)


def test_grid_barrier_on_the_cpu_target():
    _check(tilelang.compile(split_then_combine(), out_idx=[1, 2], target="cpu"))


@pytest.mark.cuda_compile
def test_grid_barrier_compiles_to_two_kernels():
    src = tilelang.compile(split_then_combine(), out_idx=[1, 2], target={"kind": "cuda", "arch": "sm_90a"}).get_kernel_source()
    assert src.count('extern "C" __global__') == 2


def _bad(kind):
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(4, threads=64) as b:
            s = T.alloc_shared((64,), "float32")
            T.copy(X, s)
            if kind == "loop":
                for i in T.serial(2):
                    T.sync_grid()
            else:
                T.sync_grid()
            for i in T.Parallel(64):
                Y[i] = s[i]
    return main


@pytest.mark.parametrize("kind,msg", [("loop", "top level of a kernel body"), ("state", "s \\(shared\\) is read after")])
def test_what_cannot_cross_a_grid_barrier_is_an_error(kind, msg):
    with pytest.raises(TilecraftError, match=msg) as e:
        _bad(kind)
    assert "test_sync_grid.py" in str(e.value)

"""`T.alloc_global`: a scratch tensor in global memory allocated by each call, written by one
`T.Kernel` and read by the next (the split / combine shape of TileLang's decoding examples), on every
target against torch; symbolic sizes; it is not returned and not an argument."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


@tilelang.jit(out_idx=[-1])
def split_sum(M, N, splits, block=64):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        partial = T.alloc_global((M, splits), "float32")
        with T.Kernel(M, splits, threads=128) as (bx, by):
            x = T.alloc_fragment((N // splits,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, by * (N // splits)], x)
            T.reduce_sum(x, s, dim=0)
            partial[bx, by] = s[0]
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            for i in T.Parallel(block):
                if bx * block + i < M:
                    acc = T.alloc_var("float32", 0.0)
                    for k in T.serial(splits):
                        acc += partial[bx * block + i, k]
                    Y[bx * block + i] = acc
    return main


@pytest.mark.parametrize("M", [8, 100])
def test_split_then_combine_through_a_global_scratch(build, device, M):
    x = torch.randn(M, 256, device=device)
    k = build(split_sum, M, 256, 4)
    torch.testing.assert_close(k(x), x.sum(1), rtol=1e-5, atol=1e-4)
    assert [p.name for p in k.params] == ["X", "Y"]


@tilelang.jit(out_idx=[-1])
def dynamic_scratch():
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        tmp = T.alloc_global((n,), "float32")
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    tmp[bx * 64 + i] = X[bx * 64 + i] * 3
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    Y[bx * 64 + i] = tmp[bx * 64 + i] + 1
    return main


def test_symbolic_size(build, device):
    k = build(dynamic_scratch)
    for n in (70, 200):
        x = torch.randn(n, device=device)
        torch.testing.assert_close(k(x), x * 3 + 1)


def test_unknown_symbol_is_refused():
    m = T.dynamic("m")
    with pytest.raises(tilelang.TilecraftError, match="T.alloc_global: tmp's size m is not a size of any tensor"):
        @T.prim_func
        def main(X: T.Tensor((8,), "float32")):
            tmp = T.alloc_global((m,), "float32")
            with T.Kernel(1, threads=32) as bx:
                X[0] = tmp[0]

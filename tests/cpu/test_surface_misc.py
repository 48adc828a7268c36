"""The reducer family (`T.alloc_reducer` / `reducer_init` / `reducer_update` / `finalize_reducer(r, dst)`),
`T.Var`, `T.align_up`, `T.im2col` (TileLang's newer name of `c2d_im2col`) on every target against torch;
`T.Ramp` / `T.Broadcast` refused at their line."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


@tilelang.jit(out_idx=[-1])
def row_reducer(M, N, op, init=None, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_shared((M, N), dtype)
            acc = T.alloc_reducer((M,), dtype, op=op)
            out = T.alloc_fragment((M,), dtype)
            T.copy(X, x)
            T.reducer_init(acc, init)
            for i in T.Parallel(M):
                for j in T.serial(N):
                    T.reducer_update(acc[i], x[i, j])
            T.finalize_reducer(acc, out)
            T.copy(out, Y)
    return main


@pytest.mark.parametrize("op,ref", [("sum", lambda x: x.sum(1)), ("max", lambda x: x.amax(1)),
                                    ("min", lambda x: x.amin(1))])
def test_reducer_ops(build, device, op, ref):
    x = torch.randn(32, 48, device=device)
    torch.testing.assert_close(build(row_reducer, 32, 48, op)(x), ref(x), rtol=1e-5, atol=1e-4)


def test_reducer_init_value_is_combined_once(build, device):
    x = torch.randn(32, 48, device=device)
    torch.testing.assert_close(build(row_reducer, 32, 48, "sum", 10.0)(x), x.sum(1) + 10, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("op", ["bitand", "bitor", "bitxor"])
def test_bitwise_reducers(build, device, op):
    import functools
    import operator
    x = torch.randint(0, 1 << 20, (16, 8), dtype=torch.int32)
    fn = {"bitand": operator.and_, "bitor": operator.or_, "bitxor": operator.xor}[op]
    ref = [functools.reduce(fn, row) for row in x.tolist()]
    assert build(row_reducer, 16, 8, op, None, "int32")(x.to(device)).cpu().tolist() == ref


def test_reducer_update_needs_a_reducer():
    with pytest.raises(tilelang.TilecraftError, match="T.reducer_update expects a buffer made by T.alloc_reducer"):
        @T.prim_func
        def main(X: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                f = T.alloc_fragment((8,), "float32")
                for i in T.Parallel(8):
                    T.reducer_update(f[i], X[i])


@tilelang.jit(out_idx=[-1])
def padded_copy(block=16):
    n = T.Var("n", "int32")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((T.align_up(40, block),), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(T.align_up(40, block)):
                Y[i] = T.if_then_else(i < n, X[i], -1.0)
    return main


def test_var_and_align_up(build, device):
    x = torch.randn(40, device=device)
    y = build(padded_copy)(x)
    assert y.shape == (48,)
    torch.testing.assert_close(y[:40], x)
    assert (y[40:] == -1).all()


@pytest.mark.parametrize("name", ["Ramp", "Broadcast"])
def test_vector_expressions_are_refused(name):
    fn = getattr(T, name)
    with pytest.raises(tilelang.TilecraftError, match=f"T.{name}.*builds a TVM vector expression") as e:
        @T.prim_func
        def main(X: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                X[0] = fn(0, 1, 4)
    assert "fn(0, 1, 4)" in str(e.value)


def test_im2col_is_c2d_im2col():
    assert T.im2col is T.c2d_im2col

"""An output allocated uninitialised (out_idx / T.empty) that the kernel only accumulates into is
said at compile time (transform/validate/outputs.py): TileLang's dsa_sparse_finetune backward adds
into a T.empty dKV, right on a GPU whose fresh memory is zeros, NaN in CPU mode."""
from __future__ import annotations

import warnings

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.transform.validate.outputs import UninitializedOutputWarning


def _scatter(clear: bool, as_input: bool = False):
    @T.prim_func
    def main(X: T.Tensor((128,), T.float32), Idx: T.Tensor((128,), T.int32), Out: T.Tensor((16,), T.float32)):
        if clear:
            with T.Kernel(1, threads=16) as _:
                for i in T.Parallel(16):
                    Out[i] = 0
        with T.Kernel(2, threads=64) as bx:
            for i in T.Parallel(64):
                T.atomic_add(Out[Idx[bx * 64 + i]], X[bx * 64 + i])
    return tilelang.compile(main, out_idx=None if as_input else [2], target="cpu")


def _compile_warnings(clear: bool, as_input: bool = False):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = _scatter(clear, as_input)
    return k, [x for x in w if issubclass(x.category, UninitializedOutputWarning)]


def test_an_output_only_added_into_is_said_with_the_atomics_line():
    _, w = _compile_warnings(clear=False)
    assert len(w) == 1
    msg = str(w[0].message)
    assert "output Out is allocated uninitialised" in msg and "test_uninitialized_outputs.py:" in msg
    assert "T.clear" in msg


@pytest.mark.parametrize("clear,as_input", [(True, False), (False, True)])
def test_a_cleared_output_or_an_input_is_not_said_and_computes_the_scatter(clear, as_input):
    k, w = _compile_warnings(clear, as_input)
    assert w == []
    x = torch.randn(128)
    idx = torch.randint(0, 16, (128,), dtype=torch.int32)
    want = torch.zeros(16).index_add_(0, idx.long(), x)
    if as_input:
        out = torch.zeros(16)
        k(x, idx, out)
    else:
        out = k(x, idx)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


def test_the_eager_style_too():
    @tilelang.jit(target="cpu")
    def scatter(X, Idx):
        N, M = T.const("N, M")
        X: T.Tensor((N,), T.float32)
        Idx: T.Tensor((N,), T.int32)
        Out = T.empty((M,), T.float32)
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            for i in T.Parallel(64):
                T.atomic_add(Out[Idx[bx * 64 + i]], X[bx * 64 + i])
        return Out

    with pytest.warns(UninitializedOutputWarning, match="scatter|main"):
        scatter.compile(N=128, M=16)

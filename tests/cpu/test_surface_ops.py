"""TileLang's current signatures and small constructs on every target against torch:
`reduce_sum(batch=)`, `reduce_max(nan_propagate=)`, `copy(annotations=)`, `gemm_sp(transpose_E=)`,
`T.assume`, `T.Kernel()` with no grid extent, `T.any_of` / `T.all_of` over a global tensor."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.utils.sparse import compress, randn_semi_sparse


@tilelang.jit(out_idx=[-1])
def row_reduce(M, N, kind, dtype, nan_propagate=False, batch=1):
    fn = {"sum": T.reduce_sum, "max": T.reduce_max, "min": T.reduce_min, "absmax": T.reduce_absmax}[kind]
    kw = {"nan_propagate": nan_propagate} if kind != "sum" else {}

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((M, N), dtype)
            y = T.alloc_fragment((M,), dtype)
            T.copy(X, x, annotations={"disable_tma": True, "coalesced_width": 4})
            T.assume(bx < 1)
            fn(x, y, dim=1, batch=batch, **kw)
            T.copy(y, Y)
    return main


def test_reduce_sum_batch(build, device):
    x = torch.randn(16, 64, device=device)
    torch.testing.assert_close(build(row_reduce, 16, 64, "sum", "float32", batch=2)(x), x.sum(1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kind", ["max", "min", "absmax"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_nan_propagate_on_16bit_floats(build, device, kind, dtype):
    x = torch.randn(16, 64, dtype=getattr(torch, dtype))
    x[3, 7] = x[10, 0] = x[10, 63] = float("nan")
    y = build(row_reduce, 16, 64, kind, dtype, nan_propagate=True)(x.to(device)).cpu()
    ref = {"max": lambda t: t.amax(1), "min": lambda t: t.amin(1), "absmax": lambda t: t.abs().amax(1)}[kind](x)
    assert torch.isnan(ref[3]) and torch.isnan(ref[10])
    torch.testing.assert_close(y, ref, equal_nan=True, rtol=0, atol=0)


def test_nan_propagate_off_ignores_nans_in_rows_without_them(build, device):
    x = torch.randn(16, 64, dtype=torch.float16)
    y = build(row_reduce, 16, 64, "max", "float16")(x.to(device)).cpu()
    torch.testing.assert_close(y, x.amax(1), rtol=0, atol=0)


def test_nan_propagate_with_clear_false_is_refused():
    with pytest.raises(tilelang.TilecraftError, match="clear=False, nan_propagate=True"):
        @T.prim_func
        def main(X: T.Tensor((8, 32), "float16"), Y: T.Tensor((8,), "float16")):
            with T.Kernel(1, threads=128) as bx:
                x = T.alloc_fragment((8, 32), "float16")
                y = T.alloc_fragment((8,), "float16")
                T.copy(X, x)
                T.reduce_max(x, y, dim=1, clear=False, nan_propagate=True)
                T.copy(y, Y)


def test_assume_false_is_an_error():
    with pytest.raises(tilelang.TilecraftError, match="T.assume: the condition is false"):
        @T.prim_func
        def main(X: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.assume(1 > 2)
                X[0] = 1.0


@tilelang.jit(out_idx=[-1])
def gemm_sp_te(M, N, K):
    @T.prim_func
    def main(A_sparse: T.Tensor((M, K // 2), "float16"), E: T.Tensor((K // 16, M), "int16"),
             B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            a_s = T.alloc_shared((M, K // 2), "float16")
            e_s = T.alloc_shared((K // 16, M), "int16")
            b_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A_sparse, a_s)
            T.copy(E, e_s)
            T.copy(B, b_s)
            T.clear(acc)
            T.gemm_sp(a_s, e_s, b_s, acc, transpose_E=True)
            T.copy(acc, C)
    return main


def test_gemm_sp_transpose_E(build, device):
    M, N, K = 64, 64, 64
    a = randn_semi_sparse(M, K, dtype=torch.float16, device="cpu")
    s, e = compress(a, arch="8.0")
    b = torch.randn(K, N).half()
    c = build(gemm_sp_te, M, N, K)(s.to(device), e.t().contiguous().to(device), b.to(device))
    torch.testing.assert_close(c.cpu(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@tilelang.jit(out_idx=[-1])
def no_grid(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(threads=128):
            for i in T.Parallel(N):
                Y[i] = X[i] * 2.0
    return main


def test_kernel_without_grid_extent_is_one_block(build, device):
    x = torch.randn(256, device=device)
    torch.testing.assert_close(build(no_grid, 256)(x), x * 2)


@tilelang.jit(out_idx=[-1])
def flags_of_rows(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "int32"), Y: T.Tensor((M, 2), "int32")):
        with T.Kernel(M, threads=32) as bx:
            Y[bx, 0] = T.any_of(X[bx, 0:N])
            Y[bx, 1] = T.all_of(X[bx, :])
    return main


def test_any_all_of_a_global_slice(build, device):
    x = (torch.rand(12, 16) < 0.1).int()
    x[0] = 0
    x[1] = 1
    x[2] = torch.randint(1, 9, (16,))
    y = build(flags_of_rows, 12, 16)(x.to(device)).cpu()
    assert y[:, 0].tolist() == (x != 0).any(1).int().tolist()
    assert y[:, 1].tolist() == (x != 0).all(1).int().tolist()


@tilelang.jit(out_idx=[-1])
def async_preferred(N):
    @T.prim_func
    def main(X: T.Tensor((N, 64), "float16"), Y: T.Tensor((N, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((N, 64), "float16")
            for i, j in T.Parallel(N, 64, prefer_async=True,
                                   annotations={"parallel_async_without_async_commit_wait": True}):
                S[i, j] = T.if_then_else(i < N - 1, X[i, j], 0)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            for k in T.unroll(2, annotations={"hint": 1}):
                for i, j in T.Parallel(N, 64):
                    if k == 0:
                        Y[i, j] = S[i, j] + 1
    return main


def test_parallel_prefer_async_and_loop_annotations(build, device):
    x = torch.randn(16, 64, device=device).half()
    ref = x.clone()
    ref[-1] = 0
    torch.testing.assert_close(build(async_preferred, 16)(x), ref + 1)

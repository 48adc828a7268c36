"""P0 tile operations (T.gemm has its own file) on every target (see conftest.py: the CPU, the
reference semantics; the GPU; compile-only for sm_90a), checked against torch.

Kernels are `@tilelang.jit` factories at module level, compiled for the test's target by the
`build` fixture, which shares one compiled kernel between the tests that use the same arguments.
Shapes are small and deliberately ragged so bounds handling is exercised everywhere.
"""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
         "float": torch.float32, "int32": torch.int32}


def rand(shape, dtype="float32", lo=-50, hi=50, device="cpu"):
    """Drawn on the CPU (the same values on every target), then moved to `device`."""
    d = TORCH[dtype]
    if d == torch.int32:
        return torch.randint(lo, hi, shape, dtype=d).to(device)
    return torch.randn(shape).to(d).to(device)


# ---- T.copy ------------------------------------------------------------------------------------

@tilelang.jit(out_idx=[-1])
def copy_chain(M, N, bm, bn, src_dtype, mid_dtype, dst_dtype):
    """global -> shared -> fragment -> global, casting wherever the dtypes differ."""
    @T.prim_func
    def main(A: T.Tensor((M, N), src_dtype), B: T.Tensor((M, N), dst_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            S = T.alloc_shared((bm, bn), src_dtype)
            F = T.alloc_fragment((bm, bn), mid_dtype)
            T.copy(A[by * bm, bx * bn], S)
            T.copy(S, F)
            T.copy(F, B[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("src,mid,dst", [
    ("float32", "float32", "float32"),
    ("float16", "float32", "float16"),
    ("bfloat16", "float32", "float32"),
    ("float32", "float16", "float32"),
    ("float32", "bfloat16", "bfloat16"),
    ("int32", "float32", "float32"),
    ("float32", "int32", "int32"),
    ("float16", "bfloat16", "float16"),
])
def test_copy_global_shared_fragment_global_casts(build, device, src, mid, dst):
    a = rand((37, 50), src, device=device) * (7 if src != "int32" else 1)
    b = build(copy_chain, 37, 50, 16, 32, src, mid, dst)(a)
    expect = a.to(TORCH[mid]).to(TORCH[dst])
    assert b.dtype == TORCH[dst]
    torch.testing.assert_close(b, expect, rtol=0, atol=0)


@tilelang.jit(out_idx=[-1])
def copy_tile_out_padded(M, N, bm, bn):
    """Each block writes its whole shared tile into a padded output: out-of-range source
    elements must arrive as zeros (SPEC §3)."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"),
             P: T.Tensor((T.ceildiv(M, bm) * bm, T.ceildiv(N, bn) * bn), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            S = T.alloc_shared((bm, bn), "float32")
            T.fill(S, 123.0)
            T.copy(A[by * bm, bx * bn], S)
            T.copy(S, P[by * bm, bx * bn])
    return main


def test_copy_ragged_edge_reads_zeros(build, device):
    a = rand((13, 21), device=device)
    p = build(copy_tile_out_padded, 13, 21, 8, 16)(a)
    assert p.shape == (16, 32)
    expect = torch.zeros(16, 32, device=device)
    expect[:13, :21] = a
    torch.testing.assert_close(p, expect, rtol=0, atol=0)


@tilelang.jit
def copy_ragged_write(M, N, bm, bn):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            F = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], F)
            for i, j in T.Parallel(bm, bn):
                F[i, j] = F[i, j] * 2.0 + 1.0
            T.copy(F, B[by * bm, bx * bn])
    return main


def test_copy_ragged_edge_writes_nothing_outside(build, device):
    # B is a view into a larger buffer: writes beyond B's bounds would hit the guard values.
    a = rand((11, 19), device=device)
    storage = torch.full((11 * 19 + 64,), -7.0, device=device)
    b = storage[:11 * 19].view(11, 19)
    build(copy_ragged_write, 11, 19, 8, 16)(a, b)
    torch.testing.assert_close(b, a * 2 + 1)
    assert torch.all(storage[11 * 19:] == -7.0)


@tilelang.jit(out_idx=[-1])
def copy_4d_point(B, S, H, D, bm):
    """`X[b, s, h, 0]` into a (bm, D) tile means X[b, s, h:h+bm, 0:D] (SPEC §3)."""
    @T.prim_func
    def main(X: T.Tensor((B, S, H, D), "float32"), Y: T.Tensor((B, S, H, D), "float32")):
        with T.Kernel(T.ceildiv(H, bm), S, B) as (bh, s, b):
            tile = T.alloc_shared((bm, D), "float32")
            T.copy(X[b, s, bh * bm, 0], tile)
            T.copy(tile, Y[b, s, bh * bm, 0])
    return main


def test_copy_point_region_4d_aligns_to_trailing_dims(build, device):
    x = rand((2, 3, 10, 8), device=device)
    y = build(copy_4d_point, 2, 3, 10, 8, 4)(x)  # H=10 is ragged against bm=4
    torch.testing.assert_close(y, x, rtol=0, atol=0)


@tilelang.jit(out_idx=[-1])
def copy_4d_slices(B, S, H, D, bm):
    @T.prim_func
    def main(X: T.Tensor((B, S, H, D), "float16"), Y: T.Tensor((B, S, H, D), "float32")):
        with T.Kernel(T.ceildiv(S, bm), H, B) as (bx, h, b):
            tile = T.alloc_shared((bm, D), "float16")
            frag = T.alloc_fragment((bm, D), "float32")
            T.copy(X[b, bx * bm:(bx + 1) * bm, h, :], tile)
            T.copy(tile, frag)
            T.copy(frag, Y[b, bx * bm:(bx + 1) * bm, h, :])
    return main


def test_copy_4d_slices_with_cast_and_ragged_seq(build, device):
    x = rand((2, 13, 3, 8), "float16", device=device)
    y = build(copy_4d_slices, 2, 13, 3, 8, 4)(x)
    torch.testing.assert_close(y, x.float(), rtol=0, atol=0)


@tilelang.jit(out_idx=[-1])
def copy_row_slices(M, N):
    """Slices on the global side into a 1-D fragment; a 2-D fragment row back out."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(M) as r:
            row = T.alloc_fragment((N,), "float32")
            two = T.alloc_fragment((2, N), "float32")
            T.copy(A[r, 0:N], row)
            T.copy(row, two[1, :])
            for j in T.Parallel(N):
                two[1, j] = two[1, j] + j
            T.copy(two[1, :], B[r, :])
    return main


@tilelang.jit(out_idx=[-1])
def copy_columns(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(N) as c:
            col = T.alloc_fragment((M,), "float32")
            T.copy(X[0:M, c], col)
            for i in T.Parallel(M):
                col[i] = col[i] * 3.0 + c
            T.copy(col, Y[0:M, c])
    return main


def test_copy_column_slice_into_1d_tile(build, device):
    x = rand((5, 6), device=device)
    torch.testing.assert_close(build(copy_columns, 5, 6)(x), 3 * x + torch.arange(6.0, device=device))


def test_copy_slices_between_1d_and_2d_tiles(build, device):
    if build.rejects_on_cuda("a part of fragment two cannot be used here on the CUDA target", copy_row_slices, 5, 12):
        return
    a = rand((5, 12), device=device)
    b = build(copy_row_slices, 5, 12)(a)
    torch.testing.assert_close(b, a + torch.arange(12, device=device).float())


# ---- T.clear / T.fill -----------------------------------------------------------------------------

@tilelang.jit(out_idx=[-1])
def fill_kernel(M, N, value, dtype):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1) as bx:
            F = T.alloc_fragment((M, N), dtype)
            S = T.alloc_shared((M, N), dtype)
            T.copy(A, F)
            T.copy(A, S)
            T.clear(S)
            T.fill(F[0:2, :], value)
            for i, j in T.Parallel(M, N):
                B[i, j] = F[i, j] + S[i, j]
    return main


@pytest.mark.parametrize("dtype,value", [("float32", 2.5), ("float16", -3.0), ("int32", 7)])
def test_fill_region_and_clear(build, device, dtype, value):
    if build.rejects_on_cuda("T.fill: a part of fragment F cannot be used here on the CUDA target",
                             fill_kernel, 5, 6, value, dtype):
        return
    a = rand((5, 6), dtype, device=device)
    b = build(fill_kernel, 5, 6, value, dtype)(a)
    expect = a.clone()
    expect[0:2, :] = value
    torch.testing.assert_close(b, expect, rtol=0, atol=0)


# ---- T.reduce_* -----------------------------------------------------------------------------------

_TORCH_REDUCE = {
    "max": lambda x, d: x.amax(d), "min": lambda x, d: x.amin(d), "sum": lambda x, d: x.sum(d),
    "abssum": lambda x, d: x.abs().sum(d), "absmax": lambda x, d: x.abs().amax(d),
}
_FOLD = {"max": torch.maximum, "min": torch.minimum, "sum": torch.add, "abssum": torch.add,
         "absmax": torch.maximum}


@tilelang.jit(out_idx=[-1])
def reduce_kernel(M, N, kind, dim, clear, dtype="float32"):
    out_n = N if dim == 0 else M
    op = {"max": T.reduce_max, "min": T.reduce_min, "sum": T.reduce_sum, "abssum": T.reduce_abssum,
          "absmax": T.reduce_absmax}[kind]

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Init: T.Tensor((out_n,), "float32"), Y: T.Tensor((out_n,), "float32")):
        with T.Kernel(1) as bx:
            xf = T.alloc_fragment((M, N), dtype)
            acc = T.alloc_fragment((out_n,), "float32")
            T.copy(X, xf)
            T.copy(Init, acc)
            op(xf, acc, dim=dim, clear=clear)
            T.copy(acc, Y)
    return main


@pytest.mark.parametrize("kind", ["max", "min", "sum", "abssum", "absmax"])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("clear", [True, False])
def test_reduce_kinds_dims_clear(build, device, kind, dim, clear):
    M, N = 7, 13
    x = rand((M, N), device=device)
    init = rand((N if dim == 0 else M,), device=device) * 3
    y = build(reduce_kernel, M, N, kind, dim, clear)(x, init)
    ref = _TORCH_REDUCE[kind](x, dim)
    if not clear:
        ref = _FOLD[kind](init, ref)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)


def test_reduce_sum_float16_source_accumulates_in_float32(build, device):
    x = rand((4, 300), "float16", device=device)
    y = build(reduce_kernel, 4, 300, "sum", 1, True, "float16")(x, torch.zeros(4, device=device))
    torch.testing.assert_close(y, x.float().sum(1), rtol=1e-4, atol=1e-3)


@tilelang.jit(out_idx=[-1])
def reduce_default_dim(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1) as bx:
            xf = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            T.copy(X, xf)
            T.reduce_max(xf, r)  # dim=-1 by default
            T.copy(r, Y)
    return main


def test_reduce_default_dim_is_last(build, device):
    x = rand((6, 9), device=device)
    torch.testing.assert_close(build(reduce_default_dim, 6, 9)(x), x.amax(1), rtol=0, atol=0)


@tilelang.jit(out_idx=[-1])
def reduce_from_shared(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((M, N), "float32")
            r = T.alloc_shared((N,), "float32")
            T.copy(X, s)
            T.reduce_sum(s, r, dim=0)
            T.copy(r, Y)
    return main


def test_reduce_shared_source_and_destination(build, device):
    # on CUDA through a fragment (transform/stage_reduce_destinations.py)
    x = rand((5, 7), device=device)
    torch.testing.assert_close(build(reduce_from_shared, 5, 7)(x), x.sum(0), rtol=1e-5, atol=1e-5)


# ---- T.atomic_add -------------------------------------------------------------------------------

@tilelang.jit
def atomic_scalar(N, block):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Out: T.Tensor((2,), "float32")):
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    T.atomic_add(Out[0], X[bx * block + i])
                    T.atomic_add(Out[1], 1.0)
    return main


def test_atomic_add_scalar_from_many_blocks(build, device):
    x = rand((1000,), device=device)
    out = torch.tensor([0.5, 0.0], device=device)
    build(atomic_scalar, 1000, 64)(x, out)
    torch.testing.assert_close(out[0], x.sum() + 0.5, rtol=1e-4, atol=1e-3)
    assert out[1].item() == 1000.0


@tilelang.jit
def atomic_tile(M, N, bm, bn, reps):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Out: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), reps) as (bx, by, r):
            F = T.alloc_fragment((bm, bn), "float32")
            T.copy(X[by * bm, bx * bn], F)
            T.atomic_add(Out[by * bm, bx * bn], F)
    return main


def test_atomic_add_tile_form_ragged(build, device):
    x = rand((10, 21), device=device)
    out = rand((10, 21), device=device)
    expect = out + 3 * x
    build(atomic_tile, 10, 21, 8, 8, 3)(x, out)
    torch.testing.assert_close(out, expect, rtol=1e-5, atol=1e-5)


# ---- T.cumsum (P1) ------------------------------------------------------------------------------

@tilelang.jit(out_idx=[-1])
def cumsum_kernel(M, N, dim, reverse, in_place):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((M, N), "float32")
            d = T.alloc_shared((M, N), "float32")
            T.copy(X, s)
            if in_place:
                T.cumsum(s, dim=dim, reverse=reverse)
                T.copy(s, Y)
            else:
                T.cumsum(s, d, dim=dim, reverse=reverse)
                T.copy(d, Y)
    return main


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("in_place", [False, True])
def test_cumsum_forward_reverse(build, device, dim, reverse, in_place):
    x = rand((5, 9), device=device)
    y = build(cumsum_kernel, 5, 9, dim, reverse, in_place)(x)
    ref = x.flip(dim).cumsum(dim).flip(dim) if reverse else x.cumsum(dim)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)


# ---- T.transpose (P2) ---------------------------------------------------------------------------

@tilelang.jit(out_idx=[-1])
def transpose_tiles(M, N, bm, bn, through_shared, dtype="float16"):
    """Y = X^T, tile by tile: block (bx, by) reads the (bm, bn) tile at (by, bx) of X and writes its
    transpose at (bx, by) of Y, either shared -> shared or straight from global into shared."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            s = T.alloc_shared((bm, bn), dtype)
            t = T.alloc_shared((bn, bm), dtype)
            if through_shared:
                T.copy(X[by * bm, bx * bn], s)
                T.transpose(s, t)
            else:
                T.transpose(X[by * bm, bx * bn], t)
            T.copy(t, Y[bx * bn, by * bm])
    return main


@pytest.mark.parametrize("through_shared", [True, False], ids=["shared", "from-global"])
@pytest.mark.parametrize("shape", [(64, 96), (70, 45)], ids=["aligned", "ragged"])
def test_transpose_tiles(build, device, shape, through_shared):
    x = rand(shape, device=device).half()
    y = build(transpose_tiles, *shape, 32, 16, through_shared)(x)
    torch.testing.assert_close(y, x.t().contiguous(), rtol=0, atol=0)


@tilelang.jit(out_idx=[-1])
def transpose_slice(M, N):
    """A 2-D plane of a 3-D shared tile into a 2-D one, with a dtype change (cast on the way)."""
    @T.prim_func
    def main(X: T.Tensor((2, M, N), "float32"), Y: T.Tensor((N, M), "float16")):
        with T.Kernel(1, threads=64) as bx:
            s = T.alloc_shared((2, M, N), "float32")
            t = T.alloc_shared((N, M), "float16")
            T.copy(X, s)
            T.transpose(s[1, 0:M, 0:N], t)
            T.copy(t, Y)
    return main


def test_transpose_of_a_slice_with_a_cast(build, device):
    x = rand((2, 8, 24), device=device)
    y = build(transpose_slice, 8, 24)(x)
    torch.testing.assert_close(y, x[1].t().half(), rtol=0, atol=0)

"""TileLang's dtype surface and options on every target (see conftest.py), against torch:
`T.dtype`, callable dtypes (`T.float32(0)`), `x.astype(...)`, `T.Cast`, `T.clamp`, `with T.attr`,
`T.Layout` annotations, and the options tilecraft accepts but does not act on (each warns once
and leaves the result unchanged)."""
from __future__ import annotations

import warnings

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


@tilelang.jit(out_idx=[-1])
def scaled_clamp(N, lo, hi, dtype: T.dtype = T.float16):
    dtype = T.dtype(dtype)

    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(N):
                x = X[i].astype("float32") * T.float32(2.5) + T.Cast("float32", T.int32(1))
                Y[i] = T.clamp(x, T.float32(lo), hi)
    return main


def test_dtype_surface_matches_torch(build, device):
    x = torch.randn(128, device=device).half() * 3
    y = build(scaled_clamp, 128, -2.0, 3.0, "float16")(x)
    torch.testing.assert_close(y, (x.float() * 2.5 + 1).clamp(-2.0, 3.0))


@tilelang.jit(out_idx=[-1])
def int_casts(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=64) as bx:
            acc = T.alloc_var("int32")
            acc = T.int32(7)
            for i in T.Parallel(N):
                Y[i] = X[i].astype(T.int32) + acc.astype("int32") * T.int32(0) + T.clamp(T.Cast("int32", X[i]), -3, 3)
    return main


def test_casts_truncate_toward_zero_like_torch(build, device):
    x = torch.randn(64, device=device) * 5
    y = build(int_casts, 64)(x)
    xi = x.to(torch.int32)
    torch.testing.assert_close(y, xi + xi.clamp(-3, 3))


@tilelang.jit(out_idx=[-1])
def copy_with_hints(M, N, block, order, layout):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            S = T.alloc_shared((block, N), "float32")
            if layout:
                T.annotate_layout({S: T.Layout((block, N), lambda i, j: [j, i])})
            T.use_swizzle(4, order=order)
            with T.attr(0, "async_scope", 1):
                T.copy(A[bx * block, 0], S)
            for k in T.Pipelined(1, num_stages=1, order=[0], stage=[0]):
                for i, j in T.Parallel(block, N):
                    B[bx * block + i, j] = S[i, j] * 2
    return main


def test_unhonoured_hints_warn_once_and_keep_results(build, device):
    a = torch.randn(64, 32, device=device)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        kernel = build(copy_with_hints, 64, 32, 16, "col", True)
    messages = " | ".join(str(x.message) for x in w)
    for what in ("T.Pipelined(order=...)", "T.Pipelined(stage=...)", "T.use_swizzle(order='col')",
                 "T.annotate_layout: the Layout given for the shared buffer"):
        assert what in messages or _warned_before(what), messages
    torch.testing.assert_close(kernel(a), a * 2)


def _warned_before(what):
    """warn_once already fired for this construct in this process (another target's param)."""
    from tilecraft.language.builder import _WARNED
    return any(what.split("(")[0].split(":")[0] in str(k) for k in _WARNED)


def test_layout_objects_evaluate_their_maps():
    lay = T.Layout((4, 8), lambda i, j: [j // 2, i, j % 2])
    assert lay.map_forward_index([3, 5]) == [2, 3, 1]
    assert lay.get_output_shape() == [4, 4, 2]
    frag = T.Fragment((16, 16), forward_thread_fn=lambda i, j: (i % 8) * 4 + j // 4,
                      forward_index_fn=lambda i, j: [i // 8 * 4 + j % 4])
    assert frag.get_thread_size() == 32 and frag.map_forward_thread([9, 7]) == 5
    from tilecraft.layout import Fragment, Layout, make_swizzled_layout  # the public module too
    assert Layout is T.Layout and Fragment is T.Fragment and callable(make_swizzled_layout)


def test_hopper_constructs_name_themselves():
    from tilecraft.errors import TilecraftError

    @tilelang.jit
    def uses_tma_copy(N):   # (the barriers, T.ws and T.set_max_nreg are there: test_hopper_manual.py)
        @T.prim_func
        def main(A: T.Tensor((N,), "float32")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((N,), "float32")
                T.tma_copy(A, s)
        return main
    with pytest.raises(TilecraftError, match="T.tma_copy: a load into shared memory needs barrier=bar"):
        uses_tma_copy.get_tir(16)


@tilelang.jit(out_idx=[-1])
def gemm_with_tilelang_options(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s, disable_tma=True, coalesced_width=8)
            T.copy(B, B_s)
            T.clear(C_f)
            T.gemm(A_s, B_s, C_f, wg_wait=-1)
            T.wait_wgmma(0)
            T.atomic_add(C[0, 0], T.float32(0), memory_order="release")
            for i, j in T.Parallel(M, N):
                C[i, j] = C_f[i, j]
    return main


def test_gemm_copy_atomic_options_warn_once_and_keep_results(build, device):
    from tilecraft.language.builder import _WARNED
    for key in [k for k in _WARNED if k[0] in ("T.copy", "T.gemm", "T.atomic_add")]:
        _WARNED.discard(key)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        kernel = build(gemm_with_tilelang_options, 32, 32, 32)
    messages = " | ".join(str(x.message) for x in w)
    for what in ("T.copy(disable_tma=True) is ignored", "T.copy(coalesced_width=8) is ignored",
                 "T.gemm(wg_wait=-1) is ignored", "T.atomic_add(memory_order='release') is ignored"):
        assert what in messages, messages
    a, b = torch.randn(32, 32, device=device).half(), torch.randn(32, 32, device=device).half()
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_atomic_return_prev_of_a_tile_is_refused():
    # one element only (the scalar form is tested in tests/cuda/test_atomic_return_prev.py)
    from tilecraft.errors import TilecraftError

    @tilelang.jit
    def returns_prev(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32")):
            with T.Kernel(1) as bx:
                old = T.atomic_add(A[0:N], 1.0, return_prev=True)
        return main
    with pytest.raises(TilecraftError, match=r"updates one element"):
        returns_prev.get_tir(4)


@tilelang.jit(out_idx=[-1])
def slices_through_names(H, D, block_H):
    @T.prim_func
    def main(Q: T.Tensor((4, H, D), "float32"), O: T.Tensor((4, H, D), "float32")):
        with T.Kernel(4, H // block_H, threads=64) as (b, g):
            S = T.alloc_shared((block_H, D), "float32")
            off = T.alloc_var("int32")
            off = g * block_H
            H0 = g * block_H
            H1 = H0 + block_H                        # a let: Q[b, H0:H1] has the static extent block_H
            T.copy(Q[b, H0:H1, :], S)
            for i, j in T.Parallel(block_H, D):
                S[i, j] = S[i, j] * 3
            T.copy(S, O[b, off:off + block_H, :])    # a scalar variable on both bounds
    return main


def test_slice_extents_see_through_lets_and_scalar_variables(build, device):
    q = torch.randn(4, 64, 32, device=device)
    torch.testing.assert_close(build(slices_through_names, 64, 32, 16)(q), q * 3)


@tilelang.jit(out_idx=[-1])
def column_sums(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), S: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_reducer((N,), "float32", op="sum")
            T.clear(acc)
            for i, j in T.Parallel(M, N):
                acc[j] += X[i, j]
            T.finalize_reducer(acc)
            for j in T.Parallel(N):
                S[j] = acc[j]
    return main


def test_reducer_sums_columns(build, device):
    x = torch.randn(64, 32, device=device)
    torch.testing.assert_close(build(column_sums, 64, 32)(x), x.sum(0), rtol=1e-5, atol=1e-5)


def test_kernel_outside_a_prim_func_says_which_style_is_missing():
    from tilecraft.errors import TilecraftError
    with pytest.raises(TilecraftError, match=r"outside a @T.prim_func body: a kernel is either"):
        with T.Kernel(4, threads=32) as bx:  # noqa: F841
            pass

"""Mistakes in a user's program (SPEC §3, §8): each raises `tilecraft.TilecraftError` whose text
names this file, the line of the offending statement and its source text, with a traceback that
does not end deep inside the compiler.

Each offending line carries a trailing `# err:<tag>` comment; `errcheck.where` finds its line number,
so moving code around never breaks the tests.
"""
from __future__ import annotations

import functools
import os

import pytest

import tilecraft
import tilecraft as tilelang
import tilecraft.language as T
from errcheck import check_error as _check_error

HERE = os.path.abspath(__file__)


def check_error(excinfo, tag, *needles):
    _check_error(excinfo.value, HERE, tag, *needles)


def compile_cpu(factory, *args):
    return tilelang.compile(factory(*args), target="cpu")


# ---- front end: names ------------------------------------------------------------------------

def unknown_language_name():
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            S = T.alloc_shard((16, 16), "float32")  # err:unknown-T
            T.copy(A, S)
    return main


def test_unknown_T_name_suggests_the_right_one():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        unknown_language_name()
    check_error(ei, "unknown-T", r"alloc_shard", r"did you mean T\.alloc_shared")


def undefined_name(block_M=16):
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            S = T.alloc_shared((blok_M, 16), "float32")  # noqa: F821  # err:undefined
            T.copy(A, S)
    return main


def test_undefined_name_suggests_the_right_one():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        undefined_name()
    check_error(ei, "undefined", r"blok_M", r"not defined", r"block_M")


def _passes_through(f):
    @functools.wraps(f)
    def inner(*args, **kwargs):
        return f(*args, **kwargs)
    return inner


def test_a_function_under_a_wrapping_decorator_names_its_own_line():
    """A decorator that wraps the function (functools.wraps) between @T.prim_func and the def: the source read
    is the wrapped function's, and so are the lines it counts from (once taken from the wrapper's code: the
    error named a line above the one at fault)."""
    with pytest.raises(tilecraft.TilecraftError) as ei:
        @T.prim_func
        @_passes_through
        def main(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.serial(16):
                    B[i] = A[i] + undefined_offset  # err:wrapped
    check_error(ei, "wrapped", r"undefined_offset", r"not defined")


# ---- T.gemm -------------------------------------------------------------------------------------

def gemm_bad(kind):
    @T.prim_func
    def main(A: T.Tensor((32, 16), "float16"), B: T.Tensor((16, 32), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1) as bx:
            A_s = T.alloc_shared((32, 16), "float16")
            B_s = T.alloc_shared((8, 32), "float16")
            B_ok = T.alloc_shared((16, 32), "float16")
            C_f = T.alloc_fragment((32, 32), "float32")
            C_small = T.alloc_fragment((32, 16), "float32")
            if kind == "k":
                T.gemm(A_s, B_s, C_f)  # err:gemm-k
            elif kind == "acc":
                T.gemm(A_s, B_ok, C_small)  # err:gemm-acc
            else:
                T.gemm(A, B_ok, C_f)  # err:gemm-global
            T.copy(C_f, C)
    return main


def test_gemm_disagreeing_K():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        gemm_bad("k")
    check_error(ei, "gemm-k", r"K", r"16", r"8", r"A_s", r"B_s")


def test_gemm_accumulator_wrong_shape():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        gemm_bad("acc")
    check_error(ei, "gemm-acc", r"C_small", r"\(32, 16\)", r"\(32, 32\)")


def test_gemm_operand_in_global_memory():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        gemm_bad("global")
    check_error(ei, "gemm-global", r"\bA\b", r"global", r"shared")


# ---- T.copy -------------------------------------------------------------------------------------

def copy_mismatch():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1) as bx:
            S = T.alloc_shared((16, 32), "float32")
            F = T.alloc_fragment((32, 16), "float32")
            T.copy(S, F)  # err:copy-shapes
    return main


def test_copy_mismatched_shapes():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        copy_mismatch()
    check_error(ei, "copy-shapes", r"\(16, 32\)", r"\(32, 16\)")


def copy_4d_never_fits(batch=2, seq=128, heads=4, dim=32, block=64):
    @T.prim_func
    def main(X: T.Tensor((batch, seq, heads, dim), "float16")):
        with T.Kernel(T.ceildiv(seq, block), heads, batch) as (bx, h, b):
            tile = T.alloc_shared((block, dim), "float16")
            T.copy(X[b, bx * block, h, 0], tile)  # err:copy-4d
    return main


def test_copy_4d_point_region_that_can_never_fit_names_buffer_dim_extent():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        copy_4d_never_fits()
    check_error(ei, "copy-4d", r"\bX\b", r"dimension 2", r"size 4", r"extent 64")


# ---- scopes --------------------------------------------------------------------------------------

def fragment_outside_kernel():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32")):
        F = T.alloc_fragment((16,), "float32")  # err:frag-outside
        with T.Kernel(1) as bx:
            T.copy(A, F)
    return main


def test_fragment_allocated_outside_kernel():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        fragment_outside_kernel()
    check_error(ei, "frag-outside", r"T\.Kernel")


def copy_outside_prim_func():
    import torch
    a, b = torch.zeros(4), torch.zeros(4)
    T.copy(a, b)  # err:copy-outside


def test_copy_outside_prim_func():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        copy_outside_prim_func()
    check_error(ei, "copy-outside", r"prim_func")


def test_copy_outside_prim_func_raises_tilecraft_error():
    with pytest.raises(tilecraft.TilecraftError, match=r"T\.copy.*prim_func"):
        copy_outside_prim_func()


# ---- dtypes, indices, loops, threads ---------------------------------------------------------------

def bad_dtype_alloc():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            S = T.alloc_shared((16,), "flaot16")  # err:dtype-alloc
            T.copy(A, S)
    return main


def test_bad_dtype_string_in_alloc():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        bad_dtype_alloc()
    check_error(ei, "dtype-alloc", r"flaot16", r"did you mean 'float16'")


def bad_dtype_param():
    @T.prim_func
    def main(A: T.Tensor((16,), "flaot32")):  # err:dtype-param
        with T.Kernel(1) as bx:
            pass
    return main


def test_bad_dtype_string_in_tensor_annotation():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        bad_dtype_param()
    check_error(ei, "dtype-param", r"flaot32", r"did you mean 'float32'")


def test_bad_dtype_string_in_tensor_annotation_is_rejected():
    with pytest.raises(ValueError, match="flaot32"):
        bad_dtype_param()


def fragment_index_out_of_range(n=16):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            F = T.alloc_fragment((n,), "float32")
            T.copy(A, F)
            for i in T.Parallel(n):
                B[i] = F[i + 1]  # err:frag-oob
    return main


def test_fragment_index_provably_out_of_range():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        compile_cpu(fragment_index_out_of_range)
    check_error(ei, "frag-oob", r"\bF\b", r"out of range", r"16")


def while_loop():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            i = 0
            while i < 4:  # err:while
                A[i] = 0.0
    return main


def test_while_loop_is_rejected():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        while_loop()
    check_error(ei, "while", r"while")


def too_many_threads():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=2048) as bx:  # err:threads
            A[0] = 1.0
    return main


def test_kernel_with_more_than_1024_threads():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        too_many_threads()
    check_error(ei, "threads", r"2048", r"1024")


def too_many_threads_list():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=[64, 32]) as bx:  # err:threads-list
            A[0] = 1.0
    return main


def test_kernel_thread_list_product_over_1024():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        too_many_threads_list()
    check_error(ei, "threads-list", r"2048")


# ---- through @tilelang.jit ---------------------------------------------------------------------------

@tilelang.jit(out_idx=[-1], target="cpu")
def jit_gemm_bad_k(M, N, K, bk):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            A_s = T.alloc_shared((M, bk), "float16")
            B_s = T.alloc_shared((bk * 2, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.gemm(A_s, B_s, C_f)  # err:jit-gemm
    return main


def test_error_through_jit_factory_points_at_user_line():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        jit_gemm_bad_k(16, 16, 32, 8)
    check_error(ei, "jit-gemm", r"K")


@tilelang.jit(out_idx=[-1], target="cpu")
def jit_shared_oob(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            S = T.alloc_shared((n,), "float32")
            T.copy(A, S)
            T.copy(S[4:n + 4], B)  # err:region-oob
    return main


def test_shared_region_out_of_range_found_by_pass_points_at_user_line():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        jit_shared_oob(16)
    check_error(ei, "region-oob", r"\bS\b", r"range")

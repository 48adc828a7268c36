"""The validation layer (transform/validate/) and the language's own checks: every invalid program
of issue 26 is refused at its line with what is wrong, before any lowering; a valid neighbour of
each still runs right on the CPU target (see test_valid_neighbours_run_right)."""
from __future__ import annotations

import os

import pytest
import torch

import tilecraft
import tilecraft as tilelang
import tilecraft.language as T
from errcheck import check_error

HERE = os.path.abspath(__file__)
N = 64


@T.macro
def forever(x):
    forever(x)  # err:macro-recursion


def mistake(kind, threads=128):
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32"), Out: T.Tensor((64,), "float32"),
             I: T.Tensor((64,), "int32")):
        with T.Kernel(2, threads=threads) as bx:
            F = T.alloc_fragment((64, 64), "float32")
            R = T.alloc_fragment((64,), "float32")
            if kind == "parallel-negative":
                for i, j in T.Parallel(-4, 64):  # err:parallel-negative
                    Y[i, j] = X[i, j]
            elif kind == "parallel-element":
                for i, j in T.Parallel(I[0], 64):  # err:parallel-element
                    Y[i, j] = X[i, j]
            elif kind == "parallel-float-element":
                for i, j in T.Parallel(X[0, 0], 64):  # err:parallel-float-element
                    Y[i, j] = X[i, j]
            elif kind == "pipelined-float-element":
                for k in T.Pipelined(X[0, 0]):  # err:pipelined-float-element
                    Y[k, 0] = X[k, 0]
            elif kind == "reduce-clear-string":
                T.copy(X, F)
                T.reduce_sum(F, R, dim=1, clear="no")  # err:reduce-clear-string
            elif kind == "gemm-transpose-none":
                S = T.alloc_shared((64, 64), "float16")
                T.gemm(S, S, F, transpose_B=None)  # err:gemm-transpose-none
            elif kind == "shift-negative":
                for j in T.Parallel(64):
                    I[j] = I[j] << -1  # err:shift-negative
            elif kind == "shift-too-far":
                for j in T.Parallel(64):
                    I[j] = I[j] >> 32  # err:shift-too-far
            elif kind == "pipelined-negative":
                for k in T.Pipelined(4, 2):  # err:pipelined-negative
                    Y[k, 0] = X[k, 0]
            elif kind == "atomic-past-end":
                for j in T.Parallel(64):
                    T.atomic_add(Out[j + 1000], X[0, j])  # err:atomic-past-end
            elif kind == "store-past-end":
                for j in T.Parallel(64):
                    Out[j + 64] = X[0, j]  # err:store-past-end
            elif kind == "div-zero":
                Y[bx, 0] = X[bx // 0, 0]  # err:div-zero
            elif kind == "mod-zero":
                Y[bx, 0] = X[bx % 0, 0]  # err:mod-zero
            elif kind == "python-div-zero":
                Y[bx, 0] = X[1 // 0, 0]  # err:python-div-zero
            elif kind == "floordiv-zero":
                Y[bx, 0] = X[T.floordiv(bx, 0), 0]  # err:floordiv-zero
            elif kind == "float-constant-overflow":
                Y[bx, 0] = X[bx, 0] + 10**400  # err:float-constant-overflow
            elif kind == "int-constant-overflow":
                Y[bx, 0] = X[bx + 2**70, 0]  # err:int-constant-overflow
            elif kind == "python-call-raises":
                Y[bx, 0] = X[int("x"), 0]  # err:python-call-raises
            elif kind == "serial-annotations":
                for k in T.serial(4, annotations=5):  # err:serial-annotations
                    Y[k, 0] = X[k, 0]
            elif kind == "shift-float":
                for i, j in T.Parallel(64, 64):
                    Y[i, j] = X[i, j] << 1  # err:shift-float
            elif kind == "xor-float":
                for i, j in T.Parallel(64, 64):
                    Y[i, j] = X[i, j] ^ 1  # err:xor-float
            elif kind == "invert-float":
                for i, j in T.Parallel(64, 64):
                    Y[i, j] = ~X[i, j]  # err:invert-float
            elif kind == "reduce-dim-str":
                T.copy(X, F)
                T.reduce_sum(F, R, dim="1")  # err:reduce-dim-str
            elif kind == "list-comprehension":
                vals = [X[i, 0] for i in range(I[0])]  # err:list-comprehension
            elif kind == "macro-recursion":
                forever(X[0, 0])
            elif kind == "cpu-huge-tile":
                H = T.alloc_shared((1 << 40,), "float32")  # err:cpu-huge-tile
                H[0] = X[0, 0]
                Y[0, 0] = H[0]
            elif kind == "symbolic-parallel-fragment":
                n = I[0]
                for i in T.serial(1):
                    for j in T.Parallel(n):  # err:symbolic-parallel-fragment
                        R[j] = X[0, j]
            else:
                T.copy(X, Y)
    return main


def threads_kernel(threads):
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=threads) as bx:  # err:threads-float
            T.copy(X, Y)
    return main


def ceildiv_kernel():
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(T.ceildiv(N, 0)) as bx:  # err:ceildiv-zero
            T.copy(X, Y)
    return main


CASES = {
    "parallel-negative": [r"T\.Parallel extent", r"negative", r"-4"],
    "parallel-element": [r"T\.Parallel extent", r"I\[0\]", r"reads a buffer element"],
    "parallel-float-element": [r"must be an integer", r"X\[0, 0\]", r"float32"],
    "pipelined-float-element": [r"T\.Pipelined stop", r"integer", r"float32"],
    "pipelined-negative": [r"T\.Pipelined", r"negative"],
    "atomic-past-end": [r"T\.atomic_add", r"never inside Out", r"1000 to 1063", r"size 64"],
    "store-past-end": [r"store to Out", r"never inside Out", r"64 to 127"],
    "div-zero": [r"integer division by zero", r"bx // 0"],
    "mod-zero": [r"integer division by zero", r"bx % 0"],
    "python-div-zero": [r"division by zero", r"1 // 0"],
    "floordiv-zero": [r"T\.floordiv\(bx, 0\)", r"division by zero"],
    # a Python int no dtype holds (OverflowError out of ir/expr.py before)
    "float-constant-overflow": [r"the constant 1000000000\.\.\.000000 \(401 digits\) is too large for float32"],
    "int-constant-overflow": [r"the constant 1180591620717411303424 does not fit in 64 bits"],
    # the program's own Python failing while the kernel is parsed (a raw ValueError before)
    "python-call-raises": [r"int\('x'\) raised ValueError: invalid literal for int\(\)"],
    "serial-annotations": [r"T\.serial: annotations must be a dict, got 5"],
    "shift-float": [r"operator << takes integers", r"X\[i, j\] is float32"],
    "xor-float": [r"operator \^ takes integers", r"float32"],
    "invert-float": [r"operator ~ takes integers", r"float32"],
    "reduce-dim-str": [r"dim must be a Python int", r"'1'"],
    "list-comprehension": [r"compile-time integer \(range\(\)", r"`I\[0\]` is a kernel value"],
    "macro-recursion": [r"T\.macro forever calls itself", r"base case"],
    "cpu-huge-tile": [r"on-chip tiles", r"CPU target", r"4096 GiB"],
    "symbolic-parallel-fragment": [r"not a compile-time constant", r"fragment buffer R", r"no defined owner"],
    "shift-negative": [r"a shift by -1 of a int32 value is undefined"],
    "shift-too-far": [r"a shift by 32 of a int32 value is undefined"],
    "reduce-clear-string": [r"clear must be True or False", r"'no' \(str\)"],
    "gemm-transpose-none": [r"transpose_B must be True or False", r"None \(NoneType\)"],
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_invalid_program_refused_at_its_line(kind):
    with pytest.raises(tilecraft.TilecraftError) as ei:
        tilelang.compile(mistake(kind), target="cpu")
    check_error(ei.value, HERE, kind, *CASES[kind])


def test_ceildiv_by_zero():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        ceildiv_kernel()
    check_error(ei.value, HERE, "ceildiv-zero", r"T\.ceildiv\(64, 0\)", r"division by zero")


def test_threads_float_is_a_clear_error():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        threads_kernel(128.0)
    check_error(ei.value, HERE, "threads-float", r"threads must be a positive int", r"128\.0 \(float\)")


def test_threads_none_means_128():
    func = threads_kernel(None)
    k = tilelang.compile(func, target="cpu")
    x = torch.randn(64, 64)
    y = torch.empty(64, 64)
    k(x, y)
    torch.testing.assert_close(y, x)
    body = func.body
    kernel = next(s for s in ([body] if not hasattr(body, "stmts") else body.stmts) if hasattr(s, "threads"))
    assert kernel.num_threads == 128


def gemm_with_unit_dim():
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 1), "float16"), C: T.Tensor((64, 1), "float32")):
        with T.Kernel(1) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 1), "float16")
            C_f = T.alloc_fragment((64, 1), "float32")
            T.gemm(A_s, B_s, C_f)  # err:gemm-unit
    return main


def test_gemm_with_a_tile_dimension_of_one():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        gemm_with_unit_dim()
    check_error(ei.value, HERE, "gemm-unit", r"T\.gemm", r"dimension of 1", r"\(32, 1\)")


def bool_accumulator():
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), C: T.Tensor((64, 64), "bool")):
        with T.Kernel(1) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            C_f = T.alloc_fragment((64, 64), "bool")
            T.gemm(A_s, A_s, C_f, transpose_B=True)  # err:gemm-bool
    return main


def test_bool_gemm_accumulator():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        tilelang.compile(bool_accumulator(), target="cpu")
    check_error(ei.value, HERE, "gemm-bool", r"accumulator C", r"bool")


def neighbours(kind):
    """Valid programs next to the refused ones: a data-dependent serial count, a ragged atomic,
    an integer shift, a constant-extent T.Parallel guarded by a run-time count."""
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), Out: T.Tensor((64,), "float32"), I: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            if kind == "serial-count":
                for k in T.serial(I[0]):
                    Out[k] = X[k, 0] * 2.0
            elif kind == "ragged-atomic":
                for j in T.Parallel(64):
                    T.atomic_add(Out[j + 32], X[0, j])
            elif kind == "int-shift":
                for j in T.Parallel(64):
                    Out[j] = T.cast((I[j] << 2) ^ 5, "float32")
            elif kind == "guarded-parallel":
                for j in T.Parallel(64):
                    if j < I[0]:
                        Out[j] = X[0, j]
    return main


@pytest.mark.parametrize("kind", ["serial-count", "ragged-atomic", "int-shift", "guarded-parallel"])
def test_valid_neighbours_run_right(kind):
    k = tilelang.compile(neighbours(kind), target="cpu")
    x = torch.randn(64, 64)
    i = torch.randint(0, 64, (64,), dtype=torch.int32)
    i[0] = 37
    out = torch.randn(64)
    ref = out.clone()
    if kind == "serial-count":
        ref[:37] = x[:37, 0] * 2
    elif kind == "ragged-atomic":
        ref[32:] += x[0, :32]
    elif kind == "int-shift":
        ref = ((i << 2) ^ 5).float()
    else:
        ref[:37] = x[0, :37]
    k(x, out, i)
    torch.testing.assert_close(out, ref)


def dynamic_tile_size():
    bs = T.dynamic("bs")

    @T.prim_func
    def main(X: T.Tensor((256, 64), "float32"), Y: T.Tensor((256, 64), "float32")):
        with T.Kernel(4) as bx:
            for i, j in T.Parallel(bs, 64):  # err:dynamic-tile
                Y[bx * 64 + i, j] = X[bx * 64 + i, j]
    return main


def dynamic_alloc():
    bs = T.dynamic("bs")

    @T.prim_func
    def main(X: T.Tensor((256, 64), "float32")):
        with T.Kernel(4) as bx:
            S = T.alloc_shared((bs, 64), "float32")  # err:dynamic-alloc
    return main


def test_a_dynamic_symbol_as_a_tile_size():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        tilelang.compile(dynamic_tile_size(), target="cpu")
    check_error(ei.value, HERE, "dynamic-tile", r"bs has no value", r"no tensor parameter's shape uses it|no tensor")
    with pytest.raises(tilecraft.TilecraftError) as ei:
        dynamic_alloc()
    check_error(ei.value, HERE, "dynamic-alloc", r"got \(bs, 64\)")
    assert "Var(" not in str(ei.value)


def test_ir_values_print_as_source_text():
    from tilecraft.ir import Buffer, Var, binary, dtype
    bx, i = Var("bx"), Var("i")
    assert repr(binary("+", binary("*", bx, 64), i)) == "bx * 64 + i"
    assert repr(Buffer("A", (4, 4), dtype.float32)) == "A"


@tilelang.jit(out_idx=[-1], target="cpu")
def doubled(n):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                Y[i] = X[i] * 2.0
    return main


def test_call_errors_name_the_factory_and_hide_the_checker():
    import traceback
    k = doubled(16)
    x = torch.randn(16)
    torch.testing.assert_close(k(x), x * 2)
    with pytest.raises(TypeError, match=r"^doubled\(16\): parameter 'X' expects dtype float32, got float16") as ei:
        k(x.half())
    frames = [f.name for f in traceback.extract_tb(ei.value.__traceback__)]
    assert "check" not in frames and "fail" not in frames, frames
    with pytest.raises(ValueError, match=r"^doubled\(16\): parameter 'X' expects shape \(16,\), got \(17,\)"):
        k(torch.randn(17))


def test_one_argument_too_many_is_reported_as_such():
    k = doubled(16)
    with pytest.raises(TypeError, match=r"parameter 'Y' expects dtype float32, got int32; this call passed 2 "
                                        r"arguments.*takes 1 input\(s\) \(X\) and allocates its outputs"):
        k(torch.randn(16), torch.arange(16, dtype=torch.int32))
    with pytest.raises(TypeError, match=r"doubled\(16\): expects 1 tensor argument\(s\) \(X\), got 3"):
        k(torch.randn(16), torch.randn(16), torch.randn(16))

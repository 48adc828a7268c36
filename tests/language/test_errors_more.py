"""More user mistakes, one branch of one kernel each: every one must raise `TilecraftError` at
the user's line with a message that says what is wrong (see errcheck.py for what is checked)."""
from __future__ import annotations

import os

import pytest

import tilecraft
import tilecraft as tilelang
import tilecraft.language as T
from errcheck import check_error

HERE = os.path.abspath(__file__)


def mistake(kind):
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float16")):
        with T.Kernel(2) as bx:
            S = T.alloc_shared((16, 16), "float32")
            H = T.alloc_shared((16, 16), "float16")
            C = T.alloc_fragment((16, 16), "float32")
            r = T.alloc_fragment((16,), "float32")
            if kind == "tile-arith":
                A[0, 0] = S + 1  # err:tile-arith
            elif kind == "gemm-dtype":
                T.gemm(S, H, C)  # err:gemm-dtype
            elif kind == "reduce-shape":
                T.reduce_sum(C, S, dim=1)  # err:reduce-shape
            elif kind == "reduce-global":
                T.reduce_max(A, r, dim=1)  # err:reduce-global
            elif kind == "reduce-dim":
                T.reduce_max(C, r, dim=2)  # err:reduce-dim
            elif kind == "slice-store":
                S[0:4, 0] = 1.0  # err:slice-store
            elif kind == "gemm-kwarg":
                T.gemm(S, S, C, trans_A=True)  # err:gemm-kwarg
            elif kind == "float-index":
                A[bx * 0.5, 0] = 1.0  # err:float-index
            elif kind == "nonstatic-slice":
                T.copy(A[0:bx, :], S)  # err:nonstatic-slice
            elif kind == "nested-kernel":
                with T.Kernel(2) as by:  # err:nested-kernel
                    pass
            elif kind == "continue":
                for i in range(4):
                    continue  # err:continue
            elif kind == "alloc-kernel-shape":
                X = T.alloc_shared((bx, 16), "float32")  # err:alloc-kernel-shape
            elif kind == "too-many-indices":
                A[0, 0, 0] = 1.0  # err:too-many-indices
            elif kind == "copy-two-elements":
                T.copy(A[0, 0], S[0, 0])  # err:copy-two-elements
            elif kind == "copy-slice-extents":
                T.copy(A[0:8, 0:16], S)  # err:copy-slice-extents
            elif kind == "parallel-float":
                for i in T.Parallel(16.0):  # err:parallel-float
                    S[0, 0] = 1.0
            elif kind == "stages":
                for k in T.Pipelined(4, num_stages=-1):  # err:stages
                    S[0, 0] = 1.0
            elif kind == "gemm-policy":
                T.gemm(S, S, C, policy="Diagonal")  # err:gemm-policy
            elif kind == "cast-dtype":
                A[0, 0] = T.cast(S[0, 0], "float17")  # err:cast-dtype
            elif kind == "return":
                return 1  # err:return
            elif kind == "transpose-shape":
                T.transpose(S, A[0:8, 0:16])  # err:transpose-shape
            elif kind == "transpose-fragment":
                T.transpose(C, S)  # err:transpose-fragment
            elif kind == "transpose-1d":
                T.transpose(r, S[0, 0:16])  # err:transpose-1d
    return main


CASES = {
    "tile-arith": [r"tile S", r"S\[i, j\]"],
    "gemm-dtype": [r"float32", r"float16", r"same dtype"],
    "reduce-shape": [r"\(16,\)", r"\(16, 16\)"],
    "reduce-global": [r"\bA\b", r"global"],
    "reduce-dim": [r"dim=2"],
    "slice-store": [r"slice of S"],
    "gemm-kwarg": [r"trans_A"],
    "float-index": [r"integer"],
    "nonstatic-slice": [r"compile-time extent"],
    "nested-kernel": [r"nested"],
    "continue": [r"continue"],
    "alloc-kernel-shape": [r"compile-time"],
    "too-many-indices": [r"2 dimension", r"3"],
    "copy-two-elements": [r"single element"],
    "copy-slice-extents": [r"\(8, 16\)", r"\(16, 16\)"],
    "parallel-float": [r"16\.0"],
    "stages": [r"num_stages"],
    "gemm-policy": [r"Diagonal"],
    "cast-dtype": [r"float17"],
    "return": [r"return"],
    "transpose-shape": [r"\(16, 16\)", r"\(8, 16\)"],
    "transpose-fragment": [r"\bC\b", r"fragment", r"shared"],
    "transpose-1d": [r"\br\b", r"\(16,\)", r"2-D tile"],
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_mistake_reported_at_user_line(kind):
    with pytest.raises(tilecraft.TilecraftError) as ei:
        mistake(kind)
    check_error(ei.value, HERE, kind, *CASES[kind])


def missing_annotation():
    @T.prim_func
    def main(A):  # err:no-annotation
        with T.Kernel(1) as bx:
            pass
    return main


def test_parameter_without_annotation():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        missing_annotation()
    check_error(ei.value, HERE, "no-annotation", r"'A'", r"T\.Tensor")


def thread_binding_on_cpu():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            A[tx] = 1.0  # err:thread-binding
    return main


NO_THREADS = {"tc.cpu_threads": False}   # else the CPU target runs it with its threads emulated


def test_thread_binding_on_cpu_target_is_a_clear_error():
    with pytest.raises(tilecraft.TilecraftError, match="CPU target"):
        tilelang.compile(thread_binding_on_cpu(), target="cpu", pass_configs=NO_THREADS)


def test_thread_binding_on_cpu_target_names_user_line():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        tilelang.compile(thread_binding_on_cpu(), target="cpu", pass_configs=NO_THREADS)
    check_error(ei.value, HERE, "thread-binding", r"CPU target")


def let_rebound_in_inner_scope():
    @T.prim_func
    def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(8) as bx:
            v = X[bx]
            if X[bx] > 0:
                v = X[bx] * 10.0  # err:let-rebind
            Y[bx] = v
    return main


def test_rebinding_outer_let_in_inner_scope_is_an_error():
    with pytest.raises(tilecraft.TilecraftError) as ei:
        let_rebound_in_inner_scope()
    check_error(ei.value, HERE, "let-rebind", r"\bv\b", r"alloc_var")


@tilelang.jit(out_idx=[-1], target="cpu")
def factory(N, block=32):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i]
    return main


def test_bad_factory_arguments_name_the_factory():
    with pytest.raises(TypeError, match=r"factory\(\).*unexpected keyword.*blok"):
        factory(16, blok=8)

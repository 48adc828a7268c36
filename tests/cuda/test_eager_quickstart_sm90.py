"""TileLang's README quickstart in the eager style (`T.const`, in-body `T.Tensor`, `T.empty`,
`return C`), compiled for sm_90a with `.compile(M=..., ...)`: the kernel takes the Hopper path, TMA
tile loads into an mbarrier ring feeding wgmma (`get_plan()`).  The same function from TileLang's
own examples (`../shared/tilelang-examples-head/examples/quickstart.py`, read, not copied) when that
corpus is present.  Compile-only: no GPU needed."""
from __future__ import annotations

import ast
import os

import pytest

import tilecraft as tilelang
import tilecraft.language as T

SM90 = {"kind": "cuda", "arch": "sm_90a"}
QUICKSTART = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "tilelang-examples-head",
                          "examples", "quickstart.py")


def matmul_relu(A, B, block_M: int = 128, block_N: int = 128, block_K: int = 32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), T.float16)
        B_s = T.alloc_shared((block_K, block_N), T.float16)
        C_l = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_l)
        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, ko * block_K], A_s)
            T.copy(B[ko * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_l)
        for i, j in T.Parallel(block_M, block_N):
            C_l[i, j] = T.max(C_l[i, j], 0)
        T.copy(C_l, C[by * block_M, bx * block_N])
    return C


def _quickstart_matmul():
    """TileLang's quickstart `matmul`, taken from its file (its module-level code needs a GPU)."""
    path = os.path.abspath(QUICKSTART)
    if not os.path.exists(path):
        pytest.skip("TileLang's example corpus (../shared/tilelang-examples-head) is not here")
    tree = ast.parse(open(path).read())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "matmul")
    fn.decorator_list = []
    ns = {"tilelang": tilelang, "T": T}
    exec(compile(ast.Module([fn], type_ignores=[]), path, "exec"), ns)  # noqa: S102 - TileLang's example
    return ns["matmul"]


@pytest.mark.parametrize("which", ["spec", "quickstart"])
def test_quickstart_takes_the_tma_wgmma_path_on_sm90a(which):
    fn = matmul_relu if which == "spec" else _quickstart_matmul()
    jit = tilelang.jit(target=SM90)(fn)
    kernel = jit.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32)
    plan = kernel.get_plan()
    assert "sm_90a" in plan and "on wgmma" in plan, plan
    assert "TMA tile loads" in plan and "mbarrier" in plan, plan
    assert [tuple(p.shape) for p in kernel.func.params] == [(1024, 1024)] * 3 and kernel.out_idx == [2]
    assert "wgmma" in kernel.get_kernel_source()


def head_weighted(Q, W):
    heads = T.const("heads")
    seq_len = T.dynamic("seq_len")
    Q: T.Tensor([seq_len * heads, 64], T.float16)
    W: T.Tensor([seq_len, heads], T.float32)
    O = T.empty([seq_len, 64], T.float32)
    with T.Kernel(T.ceildiv(seq_len, 16), threads=128) as s:
        q = T.alloc_shared((16 * heads, 64), T.float16)
        T.copy(Q[s * 16 * heads, 0], q)
        for i, d in T.Parallel(16, 64):
            acc = T.alloc_var(T.float32)
            acc = 0.0
            for h in T.serial(heads):
                acc += q[i * heads + h, d] * W[s * 16 + i, h]
            O[s * 16 + i, d] = acc
    return O


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_size_expression_of_a_dynamic_symbol_compiles_for_cuda(arch):
    kernel = tilelang.jit(target={"kind": "cuda", "arch": arch})(head_weighted).compile(heads=4)
    assert kernel._relations == (("seq_len_x4", 0, (("seq_len", 4),), "4 * seq_len"),)
    assert [p.shape for p in kernel.params] == [("seq_len_x4", 64), ("seq_len", 4), ("seq_len", 64)]


def head_scaled(A, s: T.float32, n: T.int32):
    N = T.const("N")
    A: T.Tensor((N,), T.float32)
    B = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i < n:
                B[bx * 64 + i] = A[bx * 64 + i] * s
    return B


@pytest.mark.filterwarnings("ignore::tilecraft.errors.PerformanceWarning")  # the float s is compiled in
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_an_int32_scalar_is_a_kernel_parameter_for_cuda(arch):
    """The eager jit passes an int32 scalar by value (a kernel parameter), a float one compiled in."""
    kernel = tilelang.jit(target={"kind": "cuda", "arch": arch})(head_scaled).compile(N=256, s=1.5)
    src = kernel.get_kernel_source()
    head = src[src.index("__global__"):src.index("{", src.index("__global__"))]
    assert "int n" in head.replace("int32_t", "int") and "1.5" in src, head
    assert [p.name for p in kernel.params] == ["A", "B"]

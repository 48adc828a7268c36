"""Language constructs of a kernel body, executed on every target (see conftest.py) and checked
against torch:
loops (T.Parallel / T.serial / range / T.unroll with start, stop, step), scalars (T.alloc_var,
T.alloc_local, lets), control flow (kernel-value `if`, parse-time `if`, T.if_then_else), macros
and Python helpers, symbolic sizes and layout annotations.  Scalar math is in test_math.py.
"""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.compiler import CudaCompileError
from tilecraft.kernels import gemm as gemm_kernels


# ---- loops ------------------------------------------------------------------------------------

@tilelang.jit(out_idx=[-1])
def parallel_3d(A0, A1, A2):
    @T.prim_func
    def main(X: T.Tensor((A0, A1, A2), "float32"), Y: T.Tensor((A0, A1, A2), "float32")):
        with T.Kernel(1) as bx:
            for i, j, k in T.Parallel(A0, A1, A2):
                Y[i, j, k] = X[i, j, k] * (i + 1) + j * 10 - k
    return main


def test_parallel_multi_dim_extents(build, device):
    x = torch.randn(3, 4, 5, device=device)
    i, j, k = torch.meshgrid(*(torch.arange(float(n), device=device) for n in (3, 4, 5)), indexing="ij")
    torch.testing.assert_close(build(parallel_3d, 3, 4, 5)(x), x * (i + 1) + j * 10 - k)


@tilelang.jit(out_idx=[-1])
def strided_loops(N, start, stop, step, form):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[i] = 0.0
            if form == "serial":
                for i in T.serial(start, stop, step):
                    Y[i] = X[i] + 1.0
            elif form == "range":
                for i in range(start, stop, step):
                    Y[i] = X[i] + 1.0
            else:
                for i in T.unroll(start, stop, step):
                    Y[i] = X[i] + 1.0
    return main


@pytest.mark.parametrize("form", ["serial", "range", "unroll"])
@pytest.mark.parametrize("start,stop,step", [(0, 17, 1), (3, 17, 4), (2, 17, 3), (16, 1, -3)])
def test_serial_range_unroll_start_stop_step(build, device, form, start, stop, step):
    x = torch.randn(17, device=device)
    y = build(strided_loops, 17, start, stop, step, form)(x)
    expect = torch.zeros(17, device=device)
    idx = list(range(start, stop, step))
    expect[idx] = x[idx] + 1
    torch.testing.assert_close(y, expect)


@tilelang.jit(out_idx=[-1])
def kernel_value_loop_bounds(M, N):
    """A serial loop whose bounds depend on the block index (a triangular sum)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(M) as r:
            acc = T.alloc_var("float32")
            acc = 0.0
            for j in T.serial(r, N):
                acc += X[r, j]
            Y[r] = acc
    return main


def test_loop_bounds_from_block_index(build, device):
    x = torch.randn(6, 6, device=device)
    expect = torch.stack([x[r, r:].sum() for r in range(6)])
    torch.testing.assert_close(build(kernel_value_loop_bounds, 6, 6)(x), expect)


# ---- scalars: alloc_var, alloc_local, lets ------------------------------------------------------

@tilelang.jit(out_idx=[-2, -1])
def var_accumulators(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32"), P: T.Tensor((M,), "int32")):
        with T.Kernel(M) as r:
            s = T.alloc_var("float32")
            cnt = T.alloc_var("int32", init=0)
            s = 0.0
            for j in range(N):
                s = s + X[r, j] * 0.5
                if X[r, j] > 0:
                    cnt += 1
            s += 1.0
            S[r] = s
            P[r] = cnt
    return main


def test_alloc_var_assign_and_augassign(build, device):
    x = torch.randn(5, 11, device=device)
    s, p = build(var_accumulators, 5, 11)(x)
    torch.testing.assert_close(s, (x * 0.5).sum(1) + 1.0)
    torch.testing.assert_close(p, (x > 0).sum(1).int())


@tilelang.jit(out_idx=[-1])
def local_and_lets(N):
    @T.prim_func
    def main(X: T.Tensor((N, 4), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(N) as r:
            loc = T.alloc_local((4,), "float32")
            for k in T.serial(4):
                loc[k] = X[r, k]
            a = loc[0] * loc[1]      # lets bind expressions
            b = a + loc[2]
            a = b - loc[3]           # rebinding a let
            Y[r] = a * 2.0
    return main


def test_alloc_local_and_let_bindings(build, device):
    x = torch.randn(7, 4, device=device)
    expect = (x[:, 0] * x[:, 1] + x[:, 2] - x[:, 3]) * 2
    torch.testing.assert_close(build(local_and_lets, 7)(x), expect)


@tilelang.jit(out_idx=[-1])
def two_kernels(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(N) as bx:
            Y[bx] = X[bx] + 1.0
        with T.Kernel(N) as bx:
            Y[bx] = Y[bx] * 2.0
    return main


def test_two_kernels_in_one_prim_func_run_in_order(build, device):
    x = torch.randn(9, device=device)
    torch.testing.assert_close(build(two_kernels, 9)(x), (x + 1) * 2)


# ---- control flow -------------------------------------------------------------------------------

@tilelang.jit(out_idx=[-1])
def branches(N, mode):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                if mode == "double":              # Python value: chosen at parse time
                    Y[i] = X[i] * 2.0
                else:
                    if X[i] > 0.25:               # kernel value: becomes code
                        Y[i] = X[i]
                    elif i % 3 == 0:
                        Y[i] = -1.0
                    else:
                        Y[i] = T.if_then_else(X[i] < -1.0, 10.0, 20.0)
    return main


def test_if_on_python_value_picks_branch_at_parse_time(build, device):
    ir = branches.get_tir(20, "double").script()
    assert "if " not in ir and "20.0" not in ir
    x = torch.randn(20, device=device)
    torch.testing.assert_close(build(branches, 20, "double")(x), x * 2)


def test_if_elif_else_on_kernel_values_and_if_then_else(build, device):
    x = torch.randn(20, device=device)
    i = torch.arange(20, device=device)
    expect = torch.where(x > 0.25, x, torch.where(i % 3 == 0, -1.0, torch.where(x < -1.0, 10.0, 20.0)))
    torch.testing.assert_close(build(branches, 20, "select")(x), expect)


# ---- macros, Python helpers --------------------------------------------------------------------

def gelu_tanh(x):
    """A plain Python helper: operators on kernel values build IR."""
    return 0.5 * x * (1.0 + T.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


@T.macro
def scale_rows(buf, factors, rows, cols):
    for i, j in T.Parallel(rows, cols):
        buf[i, j] = buf[i, j] * factors[i]


@tilelang.jit(out_idx=[-1])
def helpers_kernel(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), F: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((M, N), "float32")
            f = T.alloc_fragment((M,), "float32")
            T.copy(X, t)
            T.copy(F, f)
            scale_rows(t, f, M, N)
            for i, j in T.Parallel(M, N):
                t[i, j] = gelu_tanh(t[i, j])
            T.copy(t, Y)
    return main


def test_macro_and_python_helper_inlined(build, device):
    x, f = torch.randn(6, 10, device=device), torch.randn(6, device=device)
    y = build(helpers_kernel, 6, 10)(x, f)
    ref = torch.nn.functional.gelu(x * f[:, None], approximate="tanh")
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)


# ---- symbolic sizes, annotations ------------------------------------------------------------------

@tilelang.jit(out_idx=[-1])
def dynamic_scale(block=32):
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] * 3.0
    return main


@pytest.mark.parametrize("n", [1, 31, 100])
def test_dynamic_symbolic_size_bound_at_call_time(build, device, n):
    k = build(dynamic_scale)
    x = torch.randn(n, device=device)
    torch.testing.assert_close(k(x), x * 3)


@tilelang.jit(out_idx=[-1])
def dynamic_gemm_rows(N, K, bm=16):
    m = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((m, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((m, N), "float32")):
        with T.Kernel(T.ceildiv(m, bm)) as by:
            A_s = T.alloc_shared((bm, K), "float32")
            B_s = T.alloc_shared((K, N), "float32")
            C_f = T.alloc_fragment((bm, N), "float32")
            T.copy(A[by * bm, 0], A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f, clear_accum=True)
            T.copy(C_f, C[by * bm, 0])
    return main


@pytest.mark.parametrize("m", [5, 40])
def test_dynamic_rows_in_tile_copies_and_gemm(build, device, m):
    a, b = torch.randn(m, 8, device=device), torch.randn(8, 12, device=device)
    torch.testing.assert_close(build(dynamic_gemm_rows, 12, 8)(a, b), a @ b, rtol=1e-5, atol=1e-5)


# The software pipeline's forms (transform/pipeline_copies.py) with a K known only at call time:
# fewer k-tiles than stages, exactly as many, a ragged last tile.  On CUDA the prologue's tiles
# are guarded at run time; the CPU runs the reference semantics.  The library GEMM, K symbolic.
K_DYNAMIC = T.dynamic("k")
dynamic_k_gemm = tilelang.jit(out_idx=[-1])(gemm_kernels.matmul.fn)
dynamic_k_gemm_mbarrier = tilelang.jit(out_idx=[-1], pass_configs={"tc.mbarrier_pipeline": True})(
    gemm_kernels.matmul.fn)
dynamic_k_gemm_wgmma_async = tilelang.jit(out_idx=[-1], pass_configs={"tc.use_wgmma": True,
                                                                      "tc.wgmma_async": True})(gemm_kernels.matmul.fn)


@pytest.mark.parametrize("kdim", [16, 64, 96, 200])
@pytest.mark.parametrize("factory", [dynamic_k_gemm, dynamic_k_gemm_mbarrier, dynamic_k_gemm_wgmma_async],
                         ids=["barrier-in-gemm", "mbarrier", "wgmma-async"])
def test_pipelined_gemm_with_a_dynamic_k(build, device, factory, kdim):
    kern = build(factory, 96, 128, K_DYNAMIC, block_M=64, block_N=64, block_K=32, num_stages=3, threads=128)
    a = torch.randn(96, kdim, device=device).half()
    b = torch.randn(kdim, 128, device=device).half()
    ref = a.float() @ b.float()
    out = kern(a, b).float()
    assert ((out - ref).norm() / ref.norm()).item() < 1e-2


@tilelang.jit(out_idx=[-1])
def annotated_copy(M, N, bm, bn):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            S = T.alloc_shared((bm, bn), "float16")
            T.annotate_layout({S: T.make_swizzled_layout(S)})
            T.use_swizzle(panel_size=4, enable=True)
            T.copy(A[by * bm, bx * bn], S)
            T.copy(S, B[by * bm, bx * bn])
    return main


def test_layout_and_swizzle_annotations_accepted(build, device):
    a = torch.randn(20, 40, device=device).half()
    torch.testing.assert_close(build(annotated_copy, 20, 40, 8, 16)(a), a, rtol=0, atol=0)


def test_tilecraft_layout_make_swizzled_layout_alias_exists():
    from tilecraft.layout import make_swizzled_layout
    assert make_swizzled_layout is not None

"""TileLang's eager jit style (tilecraft/jit_eager.py, language/eager.py) on the CPU target, against
torch: `T.const` names bound from the call's tensors or by `.compile(M=...)`, `T.empty` outputs
returned (one or a tuple, in the order returned), one kernel per distinct set of shapes /
compile-time values, `T.dynamic` sizes (one kernel for every size), tensors declared in the
signature, the jit object's methods (`.compile`, `.get_tir`, `.get_kernel_source`, `.par_compile`),
`@tilelang.autotune` over an eager function, and the errors (at the user's line)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

HERE = "test_eager_jit.py"


@tilelang.jit(target="cpu")
def matmul_relu(A, B, block_M: int = 32, block_N: int = 32, block_K: int = 16, dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), dtype)
        B_s = T.alloc_shared((block_K, block_N), dtype)
        C_l = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_l)
        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, ko * block_K], A_s)
            T.copy(B[ko * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_l)
        for i, j in T.Parallel(block_M, block_N):
            C_l[i, j] = T.max(C_l[i, j], 0)
        T.copy(C_l, C[by * block_M, bx * block_N])
    return C


def test_shapes_bind_the_consts_and_each_shape_compiles_once():
    a, b = torch.randn(64, 48), torch.randn(48, 40)
    torch.testing.assert_close(matmul_relu(a, b), torch.relu(a @ b), rtol=1e-4, atol=1e-4)
    n = len(matmul_relu._kernels)
    a2, b2 = torch.randn(64, 48), torch.randn(48, 40)
    torch.testing.assert_close(matmul_relu(a2, b2), torch.relu(a2 @ b2), rtol=1e-4, atol=1e-4)
    assert len(matmul_relu._kernels) == n, "the same shapes reuse the kernel"
    a3 = torch.randn(33, 48)  # a ragged M: a new specialization, edges guarded
    torch.testing.assert_close(matmul_relu(a3, b), torch.relu(a3 @ b), rtol=1e-4, atol=1e-4)
    assert len(matmul_relu._kernels) == n + 1
    # .compile with the consts given explicitly is the same specialization as the call's
    k = matmul_relu.compile(M=33, N=40, K=48)
    assert len(matmul_relu._kernels) == n + 1
    torch.testing.assert_close(k(a3, b), torch.relu(a3 @ b), rtol=1e-4, atol=1e-4)
    assert tuple(k.func.params[2].shape) == (33, 40) and k.out_idx == [2]
    assert "tc_entry" in matmul_relu.get_kernel_source(a3, b)
    tir = matmul_relu.get_tir(M=8, N=16, K=24, block_M=8)
    assert [tuple(p.shape) for p in tir.params] == [(8, 24), (24, 16), (8, 16)]


def test_a_shape_that_disagrees_names_the_tensor_dimension_and_both_values():
    a = torch.randn(64, 48)
    with pytest.raises(TilecraftError) as e:
        matmul_relu(a, torch.randn(47, 40))
    msg = str(e.value)
    assert "dimension 0 of tensor B is the T.const K, bound to 48 by dimension 1 of A, but B has 47" in msg
    assert HERE in msg and "B: T.Tensor((K, N), dtype)" in msg
    with pytest.raises(TilecraftError, match="given as K=50, but B has 48"):
        matmul_relu.compile(torch.randn(64, 50), torch.randn(48, 40), K=50)
    with pytest.raises(TilecraftError, match="tensor A is declared with 2 dimensions"):
        matmul_relu(torch.randn(4, 64, 48), torch.randn(48, 40))
    with pytest.raises(TilecraftError, match=r"no value for T.const 'M': it is dimension 0 of A: pass A, or give it"):
        matmul_relu.compile(N=40, K=48)
    # a keyword that is neither a parameter nor a T.const is an error, never ignored (target= at the call
    # once compiled for the default target instead)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'target'.*T.const: M, N, K.*@tilelang.jit\(target="):
        matmul_relu(a, torch.randn(48, 40), target="cuda")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'Kk'"):
        matmul_relu.compile(M=8, N=16, K=24, Kk=3)


@tilelang.jit(target="cpu")
def rows_and_sums(X, scale, blk: int = 8):
    M, N = T.const("M N")  # space-separated names too
    X: T.Tensor[(M, N), T.float32]
    total = T.empty((M,), T.float32)
    scaled = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, blk), threads=32) as bx:
        x = T.alloc_fragment((blk, N), T.float32)
        s = T.alloc_fragment((blk,), T.float32)
        T.copy(X[bx * blk, 0], x)
        T.reduce_sum(x, s, dim=1)
        T.copy(s, total[bx * blk])
        for i, j in T.Parallel(blk, N):
            x[i, j] = x[i, j] * scale
        T.copy(x, scaled[bx * blk, 0])
    return scaled, total  # the returned order, not the order of T.empty


def test_tuple_outputs_come_back_in_the_returned_order():
    x = torch.randn(24, 16)
    scaled, total = rows_and_sums(x, 0.5)
    torch.testing.assert_close(scaled, x * 0.5)
    torch.testing.assert_close(total, x.sum(dim=1), rtol=1e-5, atol=1e-5)
    k = rows_and_sums.compile(M=24, N=16, scale=0.5)
    assert [p.name for p in k.func.params] == ["X", "scaled", "total"]
    scaled, total = k(x)
    torch.testing.assert_close(scaled, x * 0.5)
    # a different Python value is a different kernel (it is folded in as a constant)
    n = len(rows_and_sums._kernels)
    torch.testing.assert_close(rows_and_sums(x, -2.0)[0], x * -2.0)
    assert len(rows_and_sums._kernels) == n + 1


@tilelang.jit(target="cpu")
def scale_dynamic(x, alpha, block: int = 16):
    n, d = T.dynamic("n, d")  # several T.dynamic names at once
    x: T.Tensor((n, d), T.float32)
    y = T.empty((n, d), T.float32)
    with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
        for i in T.serial(block):
            for j in T.serial(d):
                if bx * block + i < n:
                    y[bx * block + i, j] = x[bx * block + i, j] * alpha
    return y


def test_dynamic_sizes_share_one_kernel():
    for shape in ((5, 3), (40, 7)):
        x = torch.randn(*shape)
        torch.testing.assert_close(scale_dynamic(x, 3.0), x * 3.0)
    assert len(scale_dynamic._kernels) == 1


K_OUT = 12
ROWS = T.dynamic("rows")


@tilelang.jit(target="cpu")
def gather_cols(src: T.Tensor((ROWS, 16), T.int32), idx: T.Tensor((K_OUT,), T.int32)):
    offset = T.const("offset")
    out = T.empty((ROWS, K_OUT), T.int32)
    with T.Kernel(ROWS, threads=32) as r:
        for j in T.serial(K_OUT):
            out[r, j] = src[r, idx[j]] * 2 + offset
    return out


def test_tensors_declared_in_the_signature():
    src = torch.randint(-100, 100, (9, 16), dtype=torch.int32)
    idx = torch.randint(0, 16, (K_OUT,), dtype=torch.int32)
    # `offset` is a T.const no tensor has as a size: only a keyword binds it
    out = gather_cols(src, idx, offset=5)
    torch.testing.assert_close(out, src[:, idx.long()] * 2 + 5)
    with pytest.raises(TilecraftError, match="no value for T.const 'offset': no tensor parameter has it"):
        gather_cols(src, idx)


@tilelang.autotune(configs=[{"blk": 8, "threads": 32}, {"blk": 16, "threads": 64}], warmup=1, rep=2)
@tilelang.jit(target="cpu")
def add_tuned(A, B, blk, threads):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B: T.Tensor((M, N), T.float32)
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, blk), threads=threads) as bx:
        for i, j in T.Parallel(blk, N):
            C[bx * blk + i, j] = A[bx * blk + i, j] + B[bx * blk + i, j] * 2
    return C


def test_autotune_over_an_eager_function():
    a, b = torch.randn(32, 8), torch.randn(32, 8)
    torch.testing.assert_close(add_tuned(a, b), a + b * 2)  # tunes for these shapes, then runs
    k = add_tuned.compile(M=32, N=8)                       # the tuned kernel, not run
    assert k.config in ({"blk": 8, "threads": 32}, {"blk": 16, "threads": 64}) and k.latency > 0
    torch.testing.assert_close(k(a, b), a + b * 2)
    # every tuned value given: that kernel, no search
    k8 = add_tuned.compile(M=32, N=8, blk=8, threads=32)
    torch.testing.assert_close(k8(a, b), a + b * 2)
    with pytest.warns(UserWarning, match="config 1 .* no value for T.const 'M'"):
        ks = add_tuned.factory.par_compile([dict(blk=8, threads=32, M=16, N=8), (None, None, 16, 64)],
                                           ignore_error=True)
    assert ks[0] is not None and ks[1] is None


def test_errors_of_the_eager_style():
    with pytest.raises(TilecraftError, match=r"T.const can only be used in the body of a @tilelang.jit"):
        T.const("M")

    def unreturned(X):
        n = T.const("n")
        X: T.Tensor((n,), T.float32)
        Y = T.empty((n,), T.float32)
        with T.Kernel(1, threads=32):
            for i in T.serial(n):
                Y[i] = X[i]

    with pytest.raises(TilecraftError, match=r"T.empty output\(s\) Y are made but not returned") as e:
        tilelang.jit(target="cpu")(unreturned)(torch.randn(4))
    assert HERE in str(e.value)
    with pytest.raises(ValueError, match="in the eager style .* declare outputs with T.empty"):
        tilelang.jit(out_idx=[-1], target="cpu")(unreturned)(torch.randn(4))


def test_the_factory_style_has_compile_too():
    @tilelang.jit(out_idx=[-1], target="cpu")
    def double(n):
        @T.prim_func
        def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=32):
                for i in T.serial(n):
                    Y[i] = X[i] * 2
        return main
    k = double.compile(7)
    assert k is double(7) and double.mode == "lazy"
    x = torch.randn(7)
    torch.testing.assert_close(k(x), x * 2)


def test_a_prelude_error_names_its_line_on_every_call():
    """The statements before the kernel are the user's Python, run on each call: an error in one names its
    own line every time (each call once moved the statement's line further down the file)."""
    import inspect

    @tilelang.jit(target="cpu")
    def shift(X, k: int = 1):
        n = T.const("n")
        X: T.Tensor((n,), T.float32)
        step = 8 // k
        Y = T.empty((n,), T.float32)
        with T.Kernel(T.ceildiv(n, step), threads=32) as bx:
            for i in T.Parallel(step):
                if bx * step + i < n:
                    Y[bx * step + i] = X[bx * step + i] + step
        return Y

    lines, first = inspect.getsourcelines(shift.fn)
    want = first + next(i for i, line in enumerate(lines) if "step = 8 // k" in line)
    x = torch.randn(20)
    for k in (1, 0, 2, 0, 4, 0):
        if k:
            torch.testing.assert_close(shift(x, k), x + 8 // k)
            continue
        with pytest.raises(TilecraftError, match="ZeroDivisionError") as e:
            shift(x, k)
        assert f'{HERE}", line {want}, in shift' in str(e.value), str(e.value)


@tilelang.jit(target="cpu")
def axpb(X, a: T.float32, b, blk: int = 16):
    n = T.const("n")
    X: T.Tensor((n,), T.float32)
    b: T.int32  # a scalar parameter declared in the body
    Y = T.empty((n,), T.float32)
    with T.Kernel(T.ceildiv(n, blk), threads=32) as bx:
        for i in T.Parallel(blk):
            Y[bx * blk + i] = X[bx * blk + i] * a + b
    return Y


def test_scalar_parameters():
    from tilecraft.errors import PerformanceWarning
    x = torch.randn(40)
    with pytest.warns(PerformanceWarning, match=r"parameter\(s\) a are compiled into the kernel as constants"):
        torch.testing.assert_close(axpb(x, 0.25, 3), x * 0.25 + 3)
    torch.testing.assert_close(axpb(x, -1.5, -7), x * -1.5 - 7)
    torch.testing.assert_close(axpb(x, -1.5, 11), x * -1.5 + 11)
    assert len(axpb._kernels) == 2  # one per value of the float a; the int32 b is passed by value
    with pytest.raises(TilecraftError, match="the scalar parameter b is declared int32, got 2.5") as e:
        axpb(x, 0.5, 2.5)
    assert HERE in str(e.value)
    with pytest.raises(TilecraftError, match="the scalar parameter a .* needs a value"):
        axpb.compile(n=40)
    torch.testing.assert_close(axpb.compile(n=40, a=2.0, b=1)(x), x * 2.0 + 1)


@tilelang.jit(target="cpu")
def head_scaled(A, s: T.float32, n: T.int32):
    N = T.const("N")
    A: T.Tensor((N,), T.float32)
    B = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i < n:
                B[bx * 64 + i] = A[bx * 64 + i] * s
            else:
                B[bx * 64 + i] = 0.0
    return B


@pytest.mark.filterwarnings("ignore::tilecraft.errors.PerformanceWarning")  # the float s is compiled in
def test_int32_scalars_are_passed_by_value():
    """TileLang passes scalar parameters at run time: an int32 one is a kernel parameter here too (one kernel
    for every value, the grid-independent guard included), given at each call of a kernel from .compile."""
    x = torch.randn(200)
    for n in (130, 200, 1, 0, -4, 1000):
        want = x * 2.5
        want[max(0, min(n, 200)):] = 0
        torch.testing.assert_close(head_scaled(x, 2.5, n), want)
    assert len(head_scaled._kernels) == 1
    k = head_scaled.compile(N=200, s=0.5)   # n not given: the kernel takes it at each call
    torch.testing.assert_close(k(x, 64), torch.cat([x[:64] * 0.5, torch.zeros(136)]))
    with pytest.raises(TilecraftError, match="the scalar parameter n is int32, got 4294967296"):
        head_scaled(x, 1.0, 2 ** 32)


@tilelang.autotune(configs=[{"tilesize": 4, "threads": 32}, {"tilesize": 8, "threads": 64}], warmup=1, rep=2)
@tilelang.jit(target="cpu")
def mul3(out, dout, tilesize: int = 32, threads: int = 128):
    seqlen = T.dynamic("seqlen")
    n = T.const("n_stream")
    shape = [seqlen, n, n]
    out: T.Tensor(shape, T.float32)
    dout: T.Tensor(shape, T.float32)
    res = T.empty(shape, T.float32)
    with T.Kernel(T.ceildiv(seqlen, tilesize), threads=threads) as i:
        for a, b, c in T.Parallel(tilesize, n, n):
            if i * tilesize + a < seqlen:
                res[i * tilesize + a, b, c] = out[i * tilesize + a, b, c] * dout[i * tilesize + a, b, c]
    return res


def test_autotune_an_eager_function_with_a_dynamic_size():
    from tilecraft.autotuner import set_autotune_inputs
    r, g = torch.randn(37, 4, 4), torch.randn(37, 4, 4)
    with set_autotune_inputs(r, g):  # the sizes the profiler cannot invent (seqlen is symbolic)
        k = mul3.compile(n_stream=4)
    torch.testing.assert_close(k(r, g), r * g)
    r2, g2 = torch.randn(50, 4, 4), torch.randn(50, 4, 4)
    torch.testing.assert_close(k(r2, g2), r2 * g2)
    # a call tunes on its own tensors when no inputs are set
    torch.testing.assert_close(mul3(r2, g2), r2 * g2)


@tilelang.jit(target="cpu")
def tail_sum(X, blk: int = 8):
    M, N = T.const("M, N")
    if N >= 16:  # Python branching on a T.const before the kernel: probed with placeholder ints
        width = 16
    else:
        width = N
    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, blk), threads=32) as bx:
        for i in T.serial(blk):
            if bx * blk + i < M:
                acc = T.alloc_var(T.float32)
                acc = 0.0
                for j in T.serial(width):
                    acc += X[bx * blk + i, N - width + j]
                Y[bx * blk + i] = acc
    return Y


def test_python_code_branching_on_a_const_before_the_kernel():
    for n in (5, 40):
        x = torch.randn(20, n)
        torch.testing.assert_close(tail_sum(x), x[:, -min(n, 16):].sum(dim=1), rtol=1e-5, atol=1e-5)
    with pytest.raises(TilecraftError, match="dimension 1 of tensor X is the T.const N"):
        tail_sum.compile(torch.randn(4, 8), N=9)


@tilelang.jit(target="cpu")
def scale_by_flag(A, double: bool = True):
    n = T.const("n")
    A: T.Tensor((n,), T.float32)
    B = T.empty((n,), T.float32)
    if double:  # a Python branch around the kernels: it picks one at compile time
        with T.Kernel(1, threads=32):
            for i in T.serial(n):
                B[i] = A[i] * 2
    else:
        with T.Kernel(1, threads=32):
            for i in T.serial(n):
                B[i] = A[i] * 3
    return B


def test_kernels_under_a_python_branch():
    a = torch.randn(5)
    torch.testing.assert_close(scale_by_flag(a), a * 2)
    torch.testing.assert_close(scale_by_flag(a, False), a * 3)


@tilelang.jit(target="cpu")
def head_weighted(Q, W):
    heads = T.const("heads")
    seq_len = T.dynamic("seq_len")
    Q: T.Tensor([seq_len * heads, 8], T.float32)  # a size that is an expression of a T.dynamic symbol
    W: T.Tensor([seq_len, heads], T.float32)
    O = T.empty([seq_len, 8], T.float32)
    with T.Kernel(seq_len, threads=32) as s:
        for d in T.serial(8):
            acc = T.alloc_var(T.float32)
            acc = 0.0
            for h in T.serial(heads):
                acc += Q[s * heads + h, d] * W[s, h]
            O[s, d] = acc
    return O


def test_a_size_that_is_an_expression_of_a_dynamic_symbol():
    for seq in (6, 11):
        q, w = torch.randn(seq * 3, 8), torch.randn(seq, 3)
        ref = torch.einsum("shd,sh->sd", q.view(seq, 3, 8), w)
        torch.testing.assert_close(head_weighted(q, w), ref, rtol=1e-5, atol=1e-5)
    assert len(head_weighted._kernels) == 1
    with pytest.raises(ValueError, match=r"a size declared as 3 \* seq_len is 17, but 3 \* seq_len = 18 with seq_len=6"):
        head_weighted(torch.randn(17, 8), torch.randn(6, 3))

"""A compiled kernel as a torch citizen, on the CPU target: inside `torch.compile(fullgraph=True)`
(through its lazily registered custom op), with DLPack inputs (numpy), and the generated fast
call agreeing with the general path on every check.  The CUDA side is tests/gpu/test_torch_gpu.py."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.kernels import elementwise, norm
from tilecraft.runtime.torch_op import written_params
from tilecraft.target import default_target


@pytest.fixture(autouse=True)
def _cpu_target():
    """The library kernels used here compile for the CPU target on a GPU machine too."""
    with default_target("cpu"):
        yield


@tilelang.jit(out_idx=[-1], target="cpu")
def scaled_add(N, alpha=0.5):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 64)) as bx:
            for i in T.Parallel(64):
                C[bx * 64 + i] = A[bx * 64 + i] * alpha + B[bx * 64 + i]
    return main


@tilelang.jit(target="cpu")  # no out_idx: writes X in place, reads W
def scale_rows_inplace(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), W: T.Tensor((N,), "float32")):
        with T.Kernel(M) as bx:
            for j in T.Parallel(N):
                X[bx, j] = X[bx, j] * W[j]
    return main


@tilelang.jit(out_idx=[-1], target="cpu")
def dyn_add(block=32):
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
    return main


@tilelang.jit(out_idx=[1, 2], target="cpu")
def two_outputs(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), S: T.Tensor((N,), "float32"), D: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 32)) as bx:
            for i in T.Parallel(32):
                S[bx * 32 + i] = A[bx * 32 + i] + 1.0
                D[bx * 32 + i] = A[bx * 32 + i] * 2.0
    return main


def _fresh():
    torch._dynamo.reset()


@pytest.fixture(autouse=True, scope="module")
def _inductor_without_its_isa_probes():
    """Inductor's C++ code for the torch ops around our kernels, without a one-time cost of a cold
    process that is inductor's own: a compile-and-load probe (g++ and a Python subprocess) of each
    vector ISA the CPU reports -- the ISA chosen is still the one the CPU reports.  This file on the
    2-core machine: 28.9 -> 22.2 CPU-s (session 26; inductor's precompiled prelude header is kept: the
    file's 11 inductor compiles cost more without it).  What is tested, our op in the compiled graph
    and inductor's code around it, is unchanged."""
    from torch._inductor import config
    with config.patch({"cpp.vec_isa_ok": True} if hasattr(config.cpp, "vec_isa_ok") else {}):
        yield


# ---- torch.compile --------------------------------------------------------------------------
def test_fullgraph_with_torch_ops_equals_eager():
    _fresh()
    add = scaled_add(1000)
    sm = norm.softmax(37, 200, dtype="float32")

    def f(a, b, x):
        c = add(torch.sin(a), b)
        return torch.relu(c) * 2 + sm(x * 0.5).sum()

    a, b, x = torch.randn(1000), torch.randn(1000), torch.randn(37, 200)
    eager = f(a, b, x)
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(a, b, x), eager)
    a2 = torch.randn(1000)  # new data, same graph
    torch.testing.assert_close(compiled(a2, b, x), f(a2, b, x))


def test_fullgraph_given_outputs_and_several_outputs():
    _fresh()
    add, two = scaled_add(300), two_outputs(300)

    def f(a, b):
        c = torch.empty_like(a)
        add(a, b, c)                      # the outputs given: written in place
        s, d = two(c)
        return s - d

    a, b = torch.randn(300), torch.randn(300)
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(a, b), f(a, b))


def test_fullgraph_in_place_kernel_mutation_is_declared():
    _fresh()
    k = scale_rows_inplace(8, 48)

    def f(x, w):
        y = x + 1
        k(y, w)          # writes y
        return y * 3

    x, w = torch.randn(8, 48), torch.randn(48)
    expect = (x + 1) * w * 3
    torch.testing.assert_close(f(x, w), expect)
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(x, w), expect)
    schema = str(k._torch_ops[0]._opoverload._schema)
    assert "Tensor(a0!) t0" in schema and "Tensor t1" in schema, schema


def test_fullgraph_symbolic_shapes():
    _fresh()
    k = dyn_add()

    def f(a, b):
        return k(a, b).sum(0, keepdim=True) + k(b, a)

    for n in (70, 131, 200):
        a, b = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(torch.compile(f, fullgraph=True, dynamic=True)(a, b), f(a, b))


def test_bad_arguments_fail_at_trace_time_with_our_message():
    _fresh()
    add = scaled_add(1000)
    with pytest.raises(Exception, match=r"parameter 'B' expects dtype float32, got float64"):
        torch.compile(lambda a: add(a, a.double()), fullgraph=True)(torch.randn(1000))


def test_ops_are_registered_lazily_with_unique_names():
    _fresh()
    k1, k2 = scaled_add(64), scaled_add(128)
    k1(torch.randn(64), torch.randn(64))
    assert getattr(k1, "_torch_ops", None) is None  # eager calls register nothing
    f1 = torch.compile(lambda a: k1(a, a), fullgraph=True)
    f2 = torch.compile(lambda a: k2(a, a), fullgraph=True)
    a1, a2 = torch.randn(64), torch.randn(128)
    torch.testing.assert_close(f1(a1), a1 * 1.5)
    torch.testing.assert_close(f2(a2), a2 * 1.5)
    names = {f"{op._namespace}::{op._name}" for k in (k1, k2) for op in k._torch_ops}
    assert len(names) == 4 and all(n.startswith("tilecraft::main_k") for n in names), names


def test_written_params_analysis():
    assert written_params(scale_rows_inplace(4, 8).func) == [0]
    assert written_params(scaled_add(64).func) == [2]
    assert written_params(two_outputs(64).func) == [1, 2]


# ---- the generated call keeps every check ---------------------------------------------------
def test_fast_call_is_generated_and_matches_general_path():
    k = scaled_add(1000)
    assert type(k).launcher in ("c", "python")   # the call made for the signature
    a, b = torch.randn(1000), torch.randn(1000)
    torch.testing.assert_close(k(a, b), k._call_checked((a, b), None))
    torch.testing.assert_close(k(a, b), a * 0.5 + b)


@pytest.mark.parametrize("bad, exc, pattern", [
    (lambda a: a.double(), TypeError, r"'B' expects dtype float32, got float64"),
    (lambda a: a[:999], ValueError, r"'B' expects shape \(1000,\)"),
    (lambda a: torch.randn(2000)[::2], ValueError, r"'B' expects a contiguous"),
    (lambda a: a.view(10, 100), ValueError, r"'B' expects 1 dimensions"),
    (lambda a: a.tolist(), TypeError, r"'B' expects a tensor \(torch.Tensor, or one that speaks DLPack"),
    (lambda a: a.to("meta"), TypeError, r"'B' expects a tensor on the cpu device"),
])
def test_fast_call_still_raises_every_check(bad, exc, pattern):
    k = scaled_add(1000)
    a = torch.randn(1000)
    with pytest.raises(exc, match=pattern):
        k(a, bad(a))
    c = torch.randn(1000)
    with pytest.raises(exc, match=pattern):
        k(a, bad(a), c)  # outputs given


def test_wrong_number_of_arguments():
    with pytest.raises(TypeError, match=r"expects 2 tensor argument\(s\) \(A, B\), got 1"):
        scaled_add(1000)(torch.randn(1000))


def test_tensor_subclass_takes_the_general_path():
    class Sub(torch.Tensor):
        pass
    k = scaled_add(1000)
    a, b = torch.randn(1000), torch.randn(1000)
    torch.testing.assert_close(k(a.as_subclass(Sub), b), a * 0.5 + b)


def test_concurrent_calls_from_threads_do_not_mix_arguments():
    k = scaled_add(4096)
    errors = []

    def worker(seed):
        g = torch.Generator().manual_seed(seed)
        for _ in range(200):
            a, b = torch.randn(4096, generator=g), torch.randn(4096, generator=g)
            if not torch.allclose(k(a, b), a * 0.5 + b):
                errors.append(seed)
                return

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ---- DLPack ---------------------------------------------------------------------------------
def test_numpy_inputs_are_accepted_and_shared():
    k = elementwise.vector_add(1000)
    a, b = np.random.randn(1000).astype(np.float32), np.random.randn(1000).astype(np.float32)
    out = k(a, b)
    assert isinstance(out, torch.Tensor)
    np.testing.assert_allclose(out.numpy(), a + b, rtol=1e-6)
    c = np.full(1000, np.nan, dtype=np.float32)
    k(a, b, c)  # written in place: the kernel sees the array's own memory
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_numpy_inputs_get_the_same_checks():
    k = elementwise.vector_add(1000)
    a = np.random.randn(1000).astype(np.float32)
    with pytest.raises(TypeError, match=r"'B' expects dtype float32, got float64"):
        k(a, a.astype(np.float64))
    with pytest.raises(ValueError, match=r"'B' expects shape \(1000,\)"):
        k(a, a[:10])
    with pytest.raises(ValueError, match=r"'B' expects a contiguous"):
        k(a, np.random.randn(2000).astype(np.float32)[::2])
    ro = a.copy()
    ro.flags.writeable = False
    with pytest.raises(TypeError, match=r"'C' is written by the kernel, but the ndarray given is read-only"):
        k(a, a, ro)


def test_dlpack_capsule_is_accepted():
    from torch.utils.dlpack import to_dlpack
    k = elementwise.vector_add(1000)
    a, b = torch.randn(1000), torch.randn(1000)
    torch.testing.assert_close(k(to_dlpack(a), to_dlpack(b)), a + b)

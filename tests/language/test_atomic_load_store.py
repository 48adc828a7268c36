"""`T.atomic_load` / `T.atomic_store` with memory orders (tileops.py; header atomic.h / tilecraft_cpu.h):
values on the CPU target, the ordered PTX compiled for sm_80 / sm_90a, misuse refused.  GPU twin
(one block hands data to another through a release store and an acquire load):
tests/gpu/test_atomic_load_store_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90a"}


def values_program():
    @T.prim_func
    def main(X: T.Tensor((4,), "float32"), C: T.Tensor((2,), "int64"), Out: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((1,), "float32")
            T.atomic_store(s[0], X[0], "relaxed")
            T.sync_threads()
            Out[0] = T.atomic_load(s[0], "acquire")
            Out[1] = T.atomic_load(X[1])
            T.atomic_store(Out[2], X[2] * 2, "release")
            T.atomic_store(C[1], T.atomic_load(C[0], "relaxed") + 5, "seq_cst")
            Out[3] = 1.0
    return main


def test_ordered_loads_and_stores_on_the_cpu_target():
    x = torch.randn(4)
    c = torch.tensor([2**40, 0], dtype=torch.int64)
    out = torch.zeros(4)
    tilelang.compile(values_program(), target="cpu")(x, c, out)
    assert out.tolist() == [x[0].item(), x[1].item(), (x[2] * 2).item(), 1.0]
    assert c.tolist() == [2**40, 2**40 + 5]


@pytest.mark.cuda_compile
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90a"])
def test_ordered_loads_and_stores_compile(target):
    src = tilelang.compile(values_program(), target=target).get_kernel_source()
    for s in ("tc::atomic_store<0>(", "tc::atomic_load<1>(", "tc::atomic_load<2>(", "tc::atomic_store<1>(",
              "tc::atomic_store<2>("):
        assert s in src, s


@pytest.mark.sass
def test_acquire_and_release_reach_sass():
    sass = tilelang.compile(handoff_program(256), target=SM80).get_sass()
    assert "STRONG.GPU" in sass, sass[:2000]


def handoff_program(n, spin_limit=1 << 24):
    """Block 0 writes Data, then releases Flag; block 1 acquires Flag (spinning), then copies Data to Out.
    Got[0]: 1 when block 1 saw the flag before giving up."""
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Data: T.Tensor((n,), "float32"), Flag: T.Tensor((1,), "int32"),
             Out: T.Tensor((n,), "float32"), Got: T.Tensor((1,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            tid = T.get_thread_binding()
            if bx == 0:
                for i in T.Parallel(n):
                    Data[i] = X[i] * 3
                T.sync_threads()
                if tid == 0:
                    T.atomic_store(Flag[0], 1, "release")
            else:
                if tid == 0:
                    k = T.alloc_var("int32")
                    k = 0
                    while T.atomic_load(Flag[0], "acquire") == 0 and k < spin_limit:
                        k = k + 1
                    Got[0] = T.if_then_else(k < spin_limit, 1, 0)
                T.sync_threads()
                for i in T.Parallel(n):
                    Out[i] = Data[i]
    return main


@pytest.mark.cuda_compile
def test_handoff_compiles():
    src = tilelang.compile(handoff_program(256), target=SM80).get_kernel_source()
    assert "tc::atomic_load<1>(" in src and "tc::atomic_store<1>(" in src


@pytest.mark.parametrize("body, message", [
    (lambda x: T.atomic_store(x, 1, "acquire"), "cannot have acquire order"),
    (lambda x: T.atomic_load(x, "weird"), "memory_order is one of"),
])
def test_bad_orders_are_refused(body, message):
    with pytest.raises(TilecraftError, match=message):
        @T.prim_func
        def main(X: T.Tensor((8,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                X[1] = body(X[0])


def test_16_bit_elements_are_refused():
    with pytest.raises(TilecraftError, match="32- or 64-bit"):
        @T.prim_func
        def main(X: T.Tensor((8,), "float16")):
            with T.Kernel(1, threads=32) as bx:
                X[1] = T.atomic_load(X[0])

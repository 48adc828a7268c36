"""Generated CUDA (sm_80 and sm_90a) computes indices into tensors past 2^31 elements in 64-bit
arithmetic (ir/index_width.py); the CPU target runs the same programs against torch at
2^31 + k elements (tests/cpu/test_index_width.py).  Small static shapes keep `int` arithmetic."""
from __future__ import annotations

import os
import re
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_index_width import add_one_static_tiles, add_one_symbolic  # noqa: E402

ARCHS = ["sm_80", "sm_90a"]
I64 = "tc::cast<tc::int64_t>"


def _source(func, arch):
    return tilelang.compile(func, target={"kind": "cuda", "arch": arch}).get_kernel_source()


def _addresses(src):
    return re.findall(r"A\[([^\]]*)\]", src)


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_int64_symbolic_extent_indexes_in_64_bit(arch):
    src = _source(add_one_symbolic(), arch)
    addrs = _addresses(src)
    assert addrs and all(a.startswith(f"(({I64}(bx) * 512LL) + ") for a in addrs), addrs
    assert f"(({I64}(bx) * 512LL) + (({I64}(e1) * 128LL) + {I64}(tc_tid))) < n)" in src   # the bounds check too
    # the let `g = bx * 512 + i` keeps its int value; addresses and checks recompute it in int64
    assert not [line for line in src.splitlines() if ("A[" in line or "< n" in line) and "(bx * 512)" in line]


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_int64_symbol_is_a_64_bit_kernel_parameter(arch):
    """A T.symbolic("n", "int64") size is passed as tc::int64_t (launch kind int64), so values past 2^31
    reach the kernel; an int symbol stays an `int` parameter."""
    k = tilelang.compile(add_one_symbolic(), target={"kind": "cuda", "arch": arch})
    assert "main_kernel(tc::uint8_t* __restrict__ A, tc::int64_t n)" in k.get_kernel_source()
    assert list(k.artifact.meta["param_kinds"]) == ["ptr", "int64"]
    import tilecraft.language as T
    m = T.symbolic("m")

    @T.prim_func
    def small(A: T.Tensor((m,), "float32")):
        with T.Kernel(T.ceildiv(m, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < m:
                    A[bx * 128 + i] = A[bx * 128 + i] + 1.0
    k32 = tilelang.compile(small, target={"kind": "cuda", "arch": arch})
    assert "small_kernel(float* __restrict__ A, int m)" in k32.get_kernel_source()
    assert list(k32.artifact.meta["param_kinds"]) == ["ptr", "int32"]


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_static_shape_past_2_31_copies_in_64_bit(arch):
    src = _source(add_one_static_tiles(), arch)
    addrs = _addresses(src)
    assert addrs and all(f"{I64}(bx) * 1024LL" in a for a in addrs), addrs
    assert "(bx * 1024)" not in src


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_small_static_shape_keeps_int_arithmetic(arch):
    src = _source(add_one_static_tiles(N=1 << 20), arch)
    assert "int64" not in src.split("__global__")[1]

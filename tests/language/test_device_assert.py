"""`T.device_assert(cond, msg)` and Python's `assert` on kernel values: checked when the kernel runs.
On the CPU target a false one raises a TilecraftError naming the program's file, line and message
(the other blocks stop; the kernel stays usable); a compile-time false condition is an error at once;
compiled for sm_80 every thread checks its own elements.  GPU twin (printf + trap, in a child
process): tests/gpu/test_device_assert_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM80 = {"kind": "cuda", "arch": "sm_80"}


def checked_program(n, limit, blocks=4):
    @T.prim_func
    def main(X: T.Tensor((blocks * n,), "int32"), Y: T.Tensor((blocks * n,), "int32")):
        with T.Kernel(blocks, threads=n) as bx:
            for i in T.Parallel(n):
                assert X[bx * n + i] < limit, "X must stay below the limit"
                Y[bx * n + i] = X[bx * n + i] * 2
            T.device_assert(X[bx * n] >= 0)
    return main


def test_asserts_pass_and_fail_on_the_cpu_target():
    k = tilelang.compile(checked_program(64, 100), target="cpu")
    x = torch.randint(0, 100, (256,), dtype=torch.int32)
    y = torch.empty_like(x)
    k(x, y)
    assert torch.equal(y, 2 * x)
    x[130] = 100
    with pytest.raises(TilecraftError, match=r"assertion failed at .*test_device_assert.py:\d+: X must stay below the limit"):
        k(x, y)
    x[130], x[64] = 5, -3
    with pytest.raises(TilecraftError, match=r"test_device_assert.py:\d+: `T.device_assert\(X\[bx \* n\] >= 0\)`"):
        k(x, y)
    x[64] = 1
    k(x, y)  # usable again: the failure does not stick
    assert torch.equal(y, 2 * x)


@pytest.mark.cuda_compile
def test_asserts_compile_for_cuda():
    src = tilelang.compile(checked_program(64, 100), target=SM80).get_kernel_source()
    assert src.count("tc::device_assert(") == 2 and "X must stay below the limit" in src


def test_a_compile_time_false_assert_is_an_error_now():
    with pytest.raises(TilecraftError, match="T.device_assert fails at compile time: never"):
        @T.prim_func
        def main(X: T.Tensor((8,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                T.device_assert(8 > 16, "never")
                X[0] = 1

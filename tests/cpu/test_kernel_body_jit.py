"""TileLang's kernel-body jit style (tilecraft/jit_eager.py): the `@tilelang.jit` function holds the
kernel; tensors are declared in the body (`x: T.Tensor(...)`), other arguments are compile-time
values, statements before the kernel run as Python.  Checked on the CPU target against torch: a
dynamic size, scalar arguments, one compile per distinct Python argument, errors at the user's line."""
from __future__ import annotations

import math

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError


@tilelang.jit(target="cpu")
def scaled_rows(x, y, hidden: int, alpha: float, block: int = 256):
    n = T.dynamic("n")
    blk = math.gcd(hidden, block)
    assert hidden % 32 == 0, "hidden must be a multiple of 32"
    x: T.Tensor((n, hidden), T.float32)
    y: T.Tensor[[n, hidden], T.float32]
    with T.Kernel(n, threads=64) as row:
        for c in T.serial(hidden // blk):
            for j in T.Parallel(blk):
                y[row, c * blk + j] = x[row, c * blk + j] * alpha + 1.0


def test_kernel_body_jit_runs_and_caches():
    for n in (3, 17):
        x, y = torch.randn(n, 384), torch.empty(n, 384)
        scaled_rows(x, y, 384, 0.5)
        torch.testing.assert_close(y, x * 0.5 + 1.0)
    assert len(scaled_rows._kernels) == 1, "one kernel for one set of Python arguments (n is dynamic)"
    x, y = torch.randn(5, 384), torch.empty(5, 384)
    scaled_rows(x, y, 384, -2.0)
    torch.testing.assert_close(y, x * -2.0 + 1.0)
    assert len(scaled_rows._kernels) == 2


def test_a_declared_tensor_must_be_a_parameter():
    @tilelang.jit(target="cpu")
    def bad(x):
        x: T.Tensor((4,), T.float32)
        z: T.Tensor((4,), T.float32)
        with T.Kernel(1, threads=4) as b:
            for i in T.Parallel(4):
                x[i] = 0.0
    with pytest.raises(TilecraftError, match="z is declared as a tensor but is not a parameter") as e:
        bad(torch.zeros(4))
    assert "test_kernel_body_jit.py" in str(e.value)


def test_a_failing_prelude_statement_names_its_line():
    with pytest.raises(TilecraftError, match="AssertionError: hidden must be a multiple of 32") as e:
        scaled_rows(torch.zeros(2, 100), torch.zeros(2, 100), 100, 1.0)
    assert "test_kernel_body_jit.py" in str(e.value)

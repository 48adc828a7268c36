"""Scalar math on every target (see conftest.py) against torch: math functions, pow/max/min and the Python
builtins on kernel values, integer and float division with Python semantics (floor) and the
trunc variants, casts and dtype limits."""
from __future__ import annotations

import math

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


# ---- math ----------------------------------------------------------------------------------------

_UNARY = {
    "exp": (T.exp, torch.exp, False), "exp2": (T.exp2, torch.exp2, False),
    "log": (T.log, torch.log, True), "sqrt": (T.sqrt, torch.sqrt, True),
    "rsqrt": (T.rsqrt, torch.rsqrt, True), "tanh": (T.tanh, torch.tanh, False),
    "sigmoid": (T.sigmoid, torch.sigmoid, False), "erf": (T.erf, torch.erf, False),
    "abs": (T.abs, torch.abs, False), "floor": (T.floor, torch.floor, False),
    "ceil": (T.ceil, torch.ceil, False), "log2": (T.log2, torch.log2, True),
}


@tilelang.jit(out_idx=[-1])
def unary_math(N, name, dtype):
    fn = _UNARY[name][0]

    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[i] = fn(X[i])
    return main


@pytest.mark.parametrize("name", sorted(_UNARY))
def test_unary_math_functions(build, device, name):
    _, ref, positive = _UNARY[name]
    x = torch.randn(64, device=device) * 3
    if positive:
        x = x.abs() + 0.1
    torch.testing.assert_close(build(unary_math, 64, name, "float32")(x), ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["exp", "tanh", "sqrt"])
def test_unary_math_on_float16_elements(build, device, name):
    _, ref, positive = _UNARY[name]
    x = (torch.randn(64, device=device) * 2).half()
    if positive:
        x = x.abs() + 0.1
    torch.testing.assert_close(build(unary_math, 64, name, "float16")(x), ref(x.float()).half(), rtol=2e-3, atol=2e-3)


@tilelang.jit(out_idx=[-1])
def binary_math(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32"), Y: T.Tensor((5, N), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.pow(T.abs(X[i]) + 0.5, Z[i])
                Y[1, i] = T.max(X[i], Z[i])
                Y[2, i] = T.min(X[i], Z[i])
                Y[3, i] = max(X[i], 0.0) + min(Z[i], 0.0)   # Python builtins on kernel values
                Y[4, i] = X[i] ** 2 + abs(Z[i])
    return main


def test_binary_math_pow_max_min_and_builtins(build, device):
    x, z = torch.randn(33, device=device), torch.randn(33, device=device)
    y = build(binary_math, 33)(x, z)
    torch.testing.assert_close(y[0], torch.pow(x.abs() + 0.5, z), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y[1], torch.maximum(x, z))
    torch.testing.assert_close(y[2], torch.minimum(x, z))
    torch.testing.assert_close(y[3], x.clamp(min=0) + z.clamp(max=0))
    torch.testing.assert_close(y[4], x * x + z.abs())


@tilelang.jit(out_idx=[-1])
def int_division(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), Y: T.Tensor((5, N), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.floordiv(A[i], B[i])
                Y[1, i] = T.floormod(A[i], B[i])
                Y[2, i] = A[i] // B[i]
                Y[3, i] = A[i] % B[i]
                Y[4, i] = T.ceildiv(A[i], B[i])
    return main


def test_integer_division_has_python_semantics_for_negative_operands(build, device):
    a, b = (t.to(device) for t in _signed_operands())
    y = build(int_division, 200)(a, b)
    fd = torch.div(a, b, rounding_mode="floor")
    torch.testing.assert_close(y[0], fd)
    torch.testing.assert_close(y[1], a - fd * b)
    torch.testing.assert_close(y[2], fd)
    torch.testing.assert_close(y[3], a - fd * b)
    pos = b > 0
    torch.testing.assert_close(y[4][pos], -torch.div(-a[pos], b[pos], rounding_mode="floor"))


def test_ceildiv_negative_divisor_matches_parse_time_fold(build, device):
    a = torch.randint(-50, 50, (200,), dtype=torch.int32)
    b = -torch.randint(1, 9, (200,), dtype=torch.int32)
    y = build(int_division, 200)(a.to(device), b.to(device))
    expect = torch.tensor([T.ceildiv(int(x), int(d)) for x, d in zip(a, b)], dtype=torch.int32)
    torch.testing.assert_close(y[4].cpu(), expect)


@tilelang.jit(out_idx=[-1])
def trunc_division(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), Y: T.Tensor((2, N), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.truncdiv(A[i], B[i])
                Y[1, i] = T.truncmod(A[i], B[i])
    return main


def _signed_operands():
    a = torch.randint(-50, 50, (200,), dtype=torch.int32)
    b = torch.randint(1, 9, (200,), dtype=torch.int32) * (torch.randint(0, 2, (200,), dtype=torch.int32) * 2 - 1)
    return a, b


def test_truncdiv_rounds_toward_zero(build, device):
    a, b = (t.to(device) for t in _signed_operands())
    torch.testing.assert_close(build(trunc_division, 200)(a, b)[0], torch.div(a, b, rounding_mode="trunc"))


def test_truncmod_takes_the_sign_of_the_dividend(build, device):
    a, b = (t.to(device) for t in _signed_operands())
    torch.testing.assert_close(build(trunc_division, 200)(a, b)[1], torch.fmod(a, b))


@tilelang.jit(out_idx=[-1])
def float_floor_division(N, d):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((2, N), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = X[i] // d
                Y[1, i] = X[i] % d
    return main


@pytest.mark.parametrize("d", [0.75, -0.75])
def test_float_floordiv_and_mod_have_python_semantics(build, device, d):
    x = torch.randn(64, device=device) * 3
    y = build(float_floor_division, 64, d)(x)
    torch.testing.assert_close(y[0], torch.floor(x / d))
    torch.testing.assert_close(y[1], torch.remainder(x, d), rtol=1e-5, atol=1e-5)


def test_ceildiv_floordiv_floormod_fold_python_values():
    assert T.ceildiv(77, 64) == 2 and T.ceildiv(-7, 2) == -3
    assert T.floordiv(-7, 2) == -4 and T.floormod(-7, 2) == 1


@tilelang.jit(out_idx=[-1])
def casts_and_limits(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((6, N), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.cast(T.cast(X[i] * 100.0, "int32"), "float32")
                Y[1, i] = T.cast(T.cast(X[i], "float16"), "float32")
                Y[2, i] = T.cast(T.cast(X[i], "bfloat16"), "float32")
                Y[3, i] = T.if_then_else(X[i] > 0, T.infinity("float32"), -T.infinity("float32"))
                Y[4, i] = T.cast(T.max_value("float16"), "float32") + X[i] * 0.0
                Y[5, i] = T.cast(T.min_value("int32"), "float32") + T.cast(T.max_value("int8"), "float32")
    return main


def test_cast_and_dtype_limits(build, device):
    x = torch.randn(16, device=device)
    y = build(casts_and_limits, 16)(x)
    torch.testing.assert_close(y[0], (x * 100).to(torch.int32).float())
    torch.testing.assert_close(y[1], x.half().float(), rtol=0, atol=0)
    torch.testing.assert_close(y[2], x.bfloat16().float(), rtol=0, atol=0)
    assert torch.equal(y[3], torch.where(x > 0, math.inf, -math.inf))
    assert torch.all(y[4] == 65504.0)
    assert torch.all(y[5] == float(-2**31 + 127))

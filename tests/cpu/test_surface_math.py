"""The rest of TileLang's (TVM's) scalar math set on every target against torch: the hyperbolic and
inverse trigonometric functions, nearbyint, hypot / copysign / nextafter, clz / popcount, and
`T.round(x, mode)`."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T

_UNARY = {  # name -> (T function, torch reference, input transform)
    "sinh": (T.sinh, torch.sinh, lambda x: x),
    "cosh": (T.cosh, torch.cosh, lambda x: x),
    "asin": (T.asin, torch.asin, lambda x: torch.tanh(x) * 0.99),
    "acos": (T.acos, torch.acos, lambda x: torch.tanh(x) * 0.99),
    "atan": (T.atan, torch.atan, lambda x: x * 3),
    "asinh": (T.asinh, torch.asinh, lambda x: x * 3),
    "acosh": (T.acosh, torch.acosh, lambda x: x.abs() + 1.01),
    "atanh": (T.atanh, torch.atanh, lambda x: torch.tanh(x) * 0.99),
    "nearbyint": (T.nearbyint, torch.round, lambda x: x * 4),
}


@tilelang.jit(out_idx=[-1])
def unary(N, name, dtype):
    fn = _UNARY[name][0]

    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[i] = fn(X[i])
    return main


@pytest.mark.parametrize("name", sorted(_UNARY))
def test_unary(build, device, name):
    _, ref, prep = _UNARY[name]
    x = prep(torch.randn(128, device=device))
    torch.testing.assert_close(build(unary, 128, name, "float32")(x), ref(x), rtol=1e-5, atol=1e-5)


def test_unary_on_bfloat16(build, device):
    x = torch.randn(128, device=device).bfloat16()
    torch.testing.assert_close(build(unary, 128, "sinh", "bfloat16")(x), torch.sinh(x.float()).bfloat16())


@tilelang.jit(out_idx=[-1])
def binary(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), Y: T.Tensor((3, N), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.hypot(A[i], B[i])
                Y[1, i] = T.copysign(A[i], B[i])
                Y[2, i] = T.nextafter(A[i], B[i])
    return main


def test_binary(build, device):
    a, b = torch.randn(96, device=device), torch.randn(96, device=device)
    y = build(binary, 96)(a, b)
    torch.testing.assert_close(y[0], torch.hypot(a, b))
    torch.testing.assert_close(y[1], torch.copysign(a, b), rtol=0, atol=0)
    torch.testing.assert_close(y[2], torch.nextafter(a, b), rtol=0, atol=0)


@tilelang.jit(out_idx=[-1])
def bit_counts(N, dtype):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((2, N), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.clz(X[i])
                Y[1, i] = T.popcount(X[i])
    return main


@pytest.mark.parametrize("dtype,bits", [("int32", 32), ("int64", 64)])
def test_clz_popcount(build, device, dtype, bits):
    x = torch.randint(-2**31 if bits == 32 else -2**62, 2**31 - 1 if bits == 32 else 2**62, (80,),
                      dtype=getattr(torch, dtype))
    x[0] = 0
    y = build(bit_counts, 80, dtype)(x.to(device)).cpu()
    u = [int(v) & ((1 << bits) - 1) for v in x.tolist()]
    assert y[0].tolist() == [bits - v.bit_length() for v in u]
    assert y[1].tolist() == [bin(v).count("1") for v in u]


def test_clz_refuses_narrow_integers():
    with pytest.raises(tilelang.TilecraftError, match="T.clz takes a 32- or 64-bit integer"):
        tilelang.compile(bit_counts.fn(8, "int16"), target="cpu")


@tilelang.jit(out_idx=[-1])
def rounding(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((5, N), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.round(X[i])
                Y[1, i] = T.round(X[i], "rn")
                Y[2, i] = T.round(X[i], "rz")
                Y[3, i] = T.round(X[i], "ru")
                Y[4, i] = T.round(X[i], "rd")
    return main


def test_round_modes(build, device):
    x = torch.randn(100, device=device) * 5
    x[:4] = torch.tensor([0.5, 1.5, -2.5, 2.5])
    y = build(rounding, 100)(x)
    for row, ref in zip(y, [torch.round(x), torch.round(x), torch.trunc(x), torch.ceil(x), torch.floor(x)]):
        torch.testing.assert_close(row, ref, rtol=0, atol=0)


def test_python_values_fold():
    assert T.sinh(0.0) == 0.0 and T.clz(1) == 31 and T.popcount(-1) == 32 and T.hypot(3, 4) == 5.0

"""The CPU target's vectorizable helpers (tilecraft_cpu.h) against torch at the edges: the exp family
(its own polynomial: within 1 ulp of the float64 value, infinities, NaN, overflow and subnormal
results), the branch-free 16-bit float conversions (bit for bit torch's, NaN, infinities, overflow
and subnormals included) and the row reductions (`tc::reduce_row`: a row length that leaves a
tail, `clear=False`, every kind).  Every target runs them (conftest.py)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T

_EXP = {"exp": (T.exp, torch.exp), "exp2": (T.exp2, torch.exp2), "exp10": (T.exp10, lambda x: torch.pow(10.0, x)),
        "sigmoid": (T.sigmoid, torch.sigmoid)}


@tilelang.jit(out_idx=[-1])
def exp_family(N, name):
    fn = _EXP[name][0]

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[i] = fn(X[i])
    return main


def _exp_inputs(name):
    top = {"exp": 89.0, "exp2": 128.5, "exp10": 38.6, "sigmoid": 80.0}[name]
    g = torch.Generator().manual_seed(7)
    x = torch.cat([torch.rand(4000, generator=g) * 2 * top - top,       # the whole range, both tails
                   torch.randn(1000, generator=g) * 1e-3,               # near 0
                   torch.tensor([v if abs(v) == float("inf") else max(-top, min(top, v)) for v in (
                       0.0, -0.0, 1.0, -1.0, 0.5, -0.5, float("inf"), float("-inf"), top, -top, 127.99, -149.0,
                       -149.5, -126.0, -125.7, 88.72, -103.9, -87.3, 38.53, -44.8)])])
    return x.float()


@pytest.mark.parametrize("name", sorted(_EXP))
def test_exp_family_within_one_ulp(build, device, name):
    x = _exp_inputs(name)
    y = build(exp_family, x.numel(), name)(x.to(device)).cpu()
    ref = _EXP[name][1](x.double())
    fin = torch.isfinite(ref) & (ref.abs() < 3.4e38)
    # the float64 value rounded to float is within 1/2 ulp of it; ours within 1 ulp of that rounding
    ulp = torch.nextafter(ref[fin].float().abs(), torch.tensor(float("inf"))) - ref[fin].float().abs()
    err = (y[fin].double() - ref[fin]).abs() / ulp.double().clamp_min(2.0 ** -149)
    # sigmoid is 1 / (1 + exp(-x)): two more roundings (and 0 once exp(-x) overflows, below -88.7).
    # The CPU target's exp family is within 1 ulp; CUDA's expf / exp2f / exp10f are documented at 2 ulp
    # (CUDA C++ Programming Guide, mathematical functions: single precision), measured 1.55-1.78 on an H200.
    bound = (1.0 if device == "cpu" else 2.0) + (1.0 if name == "sigmoid" else 0.0)
    assert err.max().item() <= bound, (name, x[fin][err.argmax()].item(), err.max().item())
    over = ~fin & ~torch.isnan(ref)
    assert torch.equal(y[over], ref[over].float())      # +-inf and the overflows
    nan = torch.tensor([float("nan")] * 8)
    assert torch.isnan(build(exp_family, 8, name)(nan.to(device)).cpu()).all()


@tilelang.jit(out_idx=[-1])
def through_16bit(N, dtype):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            h = T.alloc_fragment((N,), dtype)
            T.copy(X, h)
            T.copy(h, Y)
    return main


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_conversions_match_torch_bit_for_bit(build, device, dtype):
    tdt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(3)
    bits = torch.randint(-2 ** 31, 2 ** 31 - 1, (6000,), generator=g, dtype=torch.int64).to(torch.int32)
    x = torch.cat([bits.view(torch.float32),                                           # any float
                   torch.randn(2000, generator=g) * 1e-5, torch.randn(2000, generator=g) * 7e4,  # subnormal / overflow
                   torch.tensor([65504.0, 65519.99, 65520.0, 6.1035e-05, 5.96e-08, 2.98e-08, 2.9802322e-08,
                                 float("inf"), float("-inf"), -0.0, 3.39e38])])
    y = build(through_16bit, x.numel(), dtype)(x.to(device)).cpu()
    want = x.to(tdt).float()
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(y), nan)
    assert torch.equal(y[~nan].view(torch.int32), want[~nan].view(torch.int32))   # signed zeros too


@tilelang.jit(out_idx=[-1])
def row_reduce(M, N, kind, clear, dtype):
    op = {"sum": T.reduce_sum, "max": T.reduce_max, "min": T.reduce_min, "abssum": T.reduce_abssum,
          "absmax": T.reduce_absmax}[kind]

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), dtype)
            r = T.alloc_fragment((M,), "float32")
            T.copy(X, x)
            for i in T.Parallel(M):
                r[i] = T.cast(i, "float32") - 2.0   # what clear=False folds into
            op(x, r, dim=1, clear=clear)
            T.copy(r, Y)
    return main


@pytest.mark.parametrize("kind", ["sum", "max", "min", "abssum", "absmax"])
@pytest.mark.parametrize("clear", [True, False])
def test_row_reductions_with_a_tail(build, device, kind, clear):
    m, n = 5, 37   # 37 = 4 * 8 + 5: the lanes' tail
    x = torch.randn(m, n) * 4
    y = build(row_reduce, m, n, kind, clear, "float16")(x.half().to(device)).cpu()
    xd = x.half().double()
    ref = {"sum": xd.sum(1), "max": xd.amax(1), "min": xd.amin(1), "abssum": xd.abs().sum(1),
           "absmax": xd.abs().amax(1)}[kind]
    if not clear:
        init = torch.arange(m, dtype=torch.float64) - 2.0
        ref = {"sum": init + ref, "abssum": init + ref, "max": torch.maximum(init, ref),
               "min": torch.minimum(init, ref), "absmax": torch.maximum(init, ref)}[kind]
    if kind in ("max", "min", "absmax"):
        assert torch.equal(y.double(), ref)
    else:
        torch.testing.assert_close(y.double(), ref, rtol=1e-6, atol=1e-5)

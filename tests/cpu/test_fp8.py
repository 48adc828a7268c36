"""8-bit floats (float8_e4m3fn, float8_e5m2) on every target (see conftest.py), against torch's
float8 types: conversions both ways (all 256 bit patterns in, rounding and saturation out),
arithmetic in fp8, a per-row amax quantization (the corpus's fp8 cast), and fp8 GEMMs.

Conversions into fp8 round to nearest even and saturate to the largest finite value, as CUDA's
__nv_fp8_* constructors do (torch instead overflows to NaN / inf), so inputs beyond the range are
compared with torch after clamping."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T

FP8 = ["float8_e4m3fn", "float8_e5m2"]
FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8)


@tilelang.jit(out_idx=[-1])
def convert(N, src, dst):
    @T.prim_func
    def main(X: T.Tensor((N,), src), Y: T.Tensor((N,), dst)):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i]
    return main


@pytest.mark.parametrize("fp8", FP8)
@pytest.mark.parametrize("src", ["float32", "float16", "bfloat16"])
def test_to_fp8_rounds_like_torch_and_saturates(build, device, fp8, src):
    td = getattr(torch, fp8)
    n = 4096
    # every binade of the format: tiny (subnormal), ordinary, and beyond the largest value
    scale = torch.exp2(torch.randint(-20, 20, (n,)).float())
    x = (torch.randn(n) * scale).to(getattr(torch, src)).to(device)
    y = build(convert, n, src, fp8)(x)
    assert y.dtype == td
    ref = x.float().clamp(-FP8_MAX[fp8], FP8_MAX[fp8]).to(td)
    assert torch.equal(bits(y.cpu()), bits(ref.cpu()))


@pytest.mark.parametrize("fp8", FP8)
def test_to_fp8_at_every_rounding_boundary(build, device, fp8):
    """float32 -> fp8 at every value of the format, every midpoint between neighbours (a tie: to
    even) and the floats just either side of each, both signs, float32 subnormals and the range's
    edges: the CPU target converts on the float's bits (tilecraft_cpu.h fp8_base::encode_f32)."""
    td = getattr(torch, fp8)
    vals = torch.arange(256, dtype=torch.uint8).view(td).float()
    vals = torch.unique(vals[torch.isfinite(vals) & (vals >= 0)])  # sorted, +0 .. largest
    mids = (vals[:-1] + vals[1:]) / 2  # exact in float32
    inf = torch.tensor(float("inf"))
    pts = torch.cat([vals, mids, torch.nextafter(mids, inf), torch.nextafter(mids, -inf),
                     torch.nextafter(vals, inf), torch.nextafter(vals[1:], -inf),
                     torch.tensor([1e-45, 1e-40, 1.1754942e-38, 1.17549435e-38, 3.4028235e38, float("inf")]),
                     torch.tensor([FP8_MAX[fp8] * 1.03, FP8_MAX[fp8] * 1.0625, FP8_MAX[fp8] * 2])])
    x = torch.cat([pts, -pts])
    n = (x.numel() + 127) // 128 * 128
    x = torch.cat([x, torch.zeros(n - x.numel())]).to(device)
    y = build(convert, n, "float32", fp8)(x)
    ref = x.float().clamp(-FP8_MAX[fp8], FP8_MAX[fp8]).to(td)
    assert torch.equal(bits(y.cpu()), bits(ref.cpu()))


@pytest.mark.parametrize("fp8", FP8)
def test_fp8_nan_stays_nan(build, device, fp8):
    td = getattr(torch, fp8)
    x = torch.tensor([float("nan"), -float("nan")] * 64).to(device)
    y = build(convert, 128, "float32", fp8)(x).cpu().float()
    assert torch.isnan(y).all()


@pytest.mark.parametrize("fp8", FP8)
@pytest.mark.parametrize("dst", ["float32", "float16"])
def test_from_fp8_is_exact_for_every_bit_pattern(build, device, fp8, dst):
    td = getattr(torch, fp8)
    pattern = torch.randperm(256).repeat(4).to(torch.uint8)  # all 256 values, shuffled
    x = pattern.view(td).to(device)
    y = build(convert, 1024, fp8, dst)(x).cpu()
    ref = x.cpu().float().to(getattr(torch, dst))
    torch.testing.assert_close(y, ref, equal_nan=True, atol=0, rtol=0)


@pytest.mark.parametrize("src,dst", [("float8_e4m3fn", "float8_e5m2"), ("float8_e5m2", "float8_e4m3fn")])
def test_fp8_to_fp8(build, device, src, dst):
    x = (torch.randn(1024) * 4).to(getattr(torch, src)).to(device)
    y = build(convert, 1024, src, dst)(x).cpu()
    ref = x.cpu().float().clamp(-FP8_MAX[dst], FP8_MAX[dst]).to(getattr(torch, dst))
    assert torch.equal(bits(y), bits(ref))


@tilelang.jit(out_idx=[-1])
def fp8_arith(N, dtype):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Z: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                # each fp8 operation rounds once to fp8 (computed in float)
                Y[i] = T.max(X[i] * Z[i] - Z[i], -X[i])
    return main


@pytest.mark.parametrize("fp8", FP8)
def test_fp8_arithmetic_rounds_each_operation(build, device, fp8):
    td = getattr(torch, fp8)
    x, z = (torch.randn(2, 512) * 3).to(td)
    y = build(fp8_arith, 512, fp8)(x.to(device), z.to(device)).cpu()
    prod = (x.float() * z.float()).to(td).float()
    diff = (prod - z.float()).to(td).float()
    ref = torch.maximum(diff, -x.float()).to(td)
    assert torch.equal(bits(y), bits(ref))


@tilelang.jit(out_idx=[-2, -1])
def quantize_rows(M, N, blk_m, fp8):
    fmax = FP8_MAX[fp8]

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), fp8), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            x = T.alloc_fragment((blk_m, N), "float32")
            amax = T.alloc_fragment((blk_m,), "float32")
            y = T.alloc_fragment((blk_m, N), fp8)
            T.copy(X[bx * blk_m, 0], x)
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(blk_m):
                amax[i] = T.max(amax[i], 1e-4) / fmax
            for i, j in T.Parallel(blk_m, N):
                y[i, j] = T.clamp(x[i, j] / amax[i], -fmax, fmax)
            T.copy(y, Y[bx * blk_m, 0])
            for i in T.Parallel(blk_m):
                S[bx * blk_m + i] = amax[i]
    return main


@pytest.mark.parametrize("fp8", FP8)
def test_per_row_quantization(build, device, fp8):
    td = getattr(torch, fp8)
    x = torch.randn(64, 128) * torch.rand(64, 1) * 10
    y, s = build(quantize_rows, 64, 128, 16, fp8)(x.to(device))
    s_ref = x.abs().amax(dim=1).clamp(min=1e-4) / FP8_MAX[fp8]
    torch.testing.assert_close(s.cpu(), s_ref)
    ref = (x / s_ref[:, None]).clamp(-FP8_MAX[fp8], FP8_MAX[fp8]).to(td)
    # the division may round differently in the last float bit: allow one fp8 ulp
    yf, rf = y.cpu().float(), ref.float()
    assert ((yf - rf).abs() <= rf.abs() * 2 ** -(3 if fp8.endswith("fn") else 2) + 1e-6).all()
    assert (bits(y.cpu()) == bits(ref)).float().mean() > 0.99


@tilelang.jit(out_idx=[-1])
def fp8_gemm(M, N, K, bm, bn, bk, dtype, out_dtype):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bn, bk), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("fp8", FP8)
@pytest.mark.parametrize("out_dtype", ["float32", "fp8"])
def test_fp8_gemm_matches_torch_upcast(build, device, fp8, out_dtype):
    td = getattr(torch, fp8)
    out = fp8 if out_dtype == "fp8" else out_dtype
    a = torch.randn(128, 192).to(td)
    b = torch.randn(64, 192).to(td)
    c = build(fp8_gemm, 128, 64, 192, 64, 64, 64, fp8, out)(a.to(device), b.to(device)).cpu()
    ref = a.double() @ b.double().T   # fp8 products are exact; only the summation order differs
    if out == fp8:
        got, want = c.float(), ref.float().to(td).float()
        # one rounding to fp8 of a float32 sum: at most one fp8 ulp apart
        assert ((got - want).abs() <= want.abs() * 2 ** -(3 if fp8.endswith("fn") else 2) + 1e-3).all()
    elif device == "cpu":
        torch.testing.assert_close(c, ref.float(), rtol=1e-5, atol=1e-4)
    else:
        # Hopper's fp8 MMA keeps about 13 mantissa bits when it adds a k32 step's products into the
        # accumulator (cuBLAS's unpromoted fp8 GEMM alike): per step at most 2^-13 of the running sum's
        # magnitude, bounded by sum_k |a||b|.  Measured on an H200: 0.023 at K = 192 (2^-12.3 of it).
        mag = a.double().abs() @ b.double().abs().T
        assert ((c.double() - ref).abs() <= (192 // 32) * 2.0 ** -13 * mag + 1e-4).all()

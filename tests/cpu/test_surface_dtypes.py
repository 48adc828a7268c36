"""TileLang's current dtype names on every target: `T.int` / `T.uint` / `T.short` / `T.long`,
`T.tfloat32` (float32 storage), `T.float8_e4m3`, `n = T.int32()` as a symbolic size, the
`tilelang.language.dtypes` module, and a clear error at the user's line for the formats tilecraft
can name but not store (`T.int4`, `T.float4_e2m1fn`, `T.float8_e8m0fnu`)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


def test_names_are_tilelang_s():
    assert T.int is T.int32 and T.uint is T.uint32 and T.short is T.int16 and T.long is T.int64
    assert T.float8_e4m3 is T.float8_e4m3fn and T.tfloat32 is T.float32
    assert T.float8_e8m0fnu.bits == 8 and T.int4.bits == 4 and T.float4_e2m1fn.bits == 4
    assert T.int4 in [T.int4, T.int8] and T.uint == "uint32" and T.dtype("uint") is T.uint32
    assert T.int32(7).value == 7 and T.float8_e8m0fnu.as_torch() is torch.float8_e8m0fnu


def test_dtypes_module_via_tilelang_alias():
    import tilecraft.compat
    tilecraft.compat.install()
    from tilelang.language.dtypes import _TORCH_DTYPE_TO_STR, dtype  # noqa: I001
    assert _TORCH_DTYPE_TO_STR[torch.bfloat16] == "bfloat16" and dtype(torch.float16) is T.float16
    assert dtype("uint") is T.uint32


@tilelang.jit(out_idx=[-1])
def scale_rows(block=32):
    n = T.int32()   # TVM script's fresh symbolic variable: the size is bound from the tensor

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = X[bx * block + i] * T.float32(3)
    return main


@pytest.mark.parametrize("n", [40, 97])
def test_int32_call_makes_a_symbolic_size(build, device, n):
    x = torch.randn(n, device=device)
    torch.testing.assert_close(build(scale_rows)(x), x * 3)


@tilelang.jit(out_idx=[-1])
def tf32_gemm(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.tfloat32), B: T.Tensor((K, N), T.tfloat32), C: T.Tensor((M, N), T.float)):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, K), T.tfloat32)
            B_s = T.alloc_shared((K, N), T.tfloat32)
            C_f = T.alloc_fragment((M, N), T.float)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C_f)
            T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)
    return main


def test_tfloat32_gemm(build, device):
    a, b = torch.randn(32, 32, device=device), torch.randn(32, 32, device=device)
    # tf32 keeps 10 mantissa bits on tensor cores: compare at tf32's precision
    torch.testing.assert_close(build(tf32_gemm, 32, 32, 32)(a, b), a @ b, rtol=2e-2, atol=5e-2)


@tilelang.jit(out_idx=[-1])
def to_fp8(N):
    @T.prim_func
    def main(X: T.Tensor((N,), T.float), Y: T.Tensor((N,), T.float8_e4m3)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Y[i] = T.cast(X[i], T.float8_e4m3)
    return main


def test_float8_e4m3_is_e4m3fn(build, device):
    x = torch.randn(64, device=device) * 4
    assert torch.equal(build(to_fp8, 64)(x).float(), x.to(torch.float8_e4m3fn).float())


@tilelang.jit(out_idx=[-1])
def int4_copy(N, dtype):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(1) as bx:
            T.copy(X, Y)
    return main


@pytest.mark.parametrize("dtype", ["float4_e2m1fn", "float8_e8m0fnu"])   # int4: tests/cpu/test_int4.py
def test_storage_only_formats_are_refused_at_the_line(dtype):
    with pytest.raises(tilelang.TilecraftError, match=f"T.Tensor: {dtype} .* has no storage or arithmetic") as e:
        tilelang.compile(int4_copy.fn(16, getattr(T, dtype)), target="cpu")
    assert "test_surface_dtypes.py" in str(e.value)


def test_cast_to_fp4_is_refused():
    with pytest.raises(tilelang.TilecraftError, match="T.cast: float4_e2m1fn") as e:
        @T.prim_func
        def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "uint8")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(8):
                    Y[i] = T.reinterpret(T.cast(X[i], T.float4_e2m1fn), T.uint8)
    assert "T.cast(X[i], T.float4_e2m1fn)" in str(e.value)

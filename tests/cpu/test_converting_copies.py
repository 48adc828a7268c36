"""A tile copy between shared (or global and shared) tiles of different element types: on CUDA one
aligned vector load, a conversion and one aligned vector store per 16 bytes (`tc::vec_convert`; an fp8 KV
tile widened to bf16 for MLA decode's gemms), on every target against torch -- the CPU target, the CPU
target with the block's threads emulated (`tc.cpu_threads: True`, where the CUDA lowering itself runs) and
a compile for sm_90a (see conftest.py)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T

ROWS, COLS = 16, 512


@tilelang.jit(out_idx=[-1])
def widen(src_dtype: str, dst_dtype: str, offset: int = 0):
    """Y = X[:, offset:offset + COLS] converted, by way of two shared tiles (the second copy converts)."""
    @T.prim_func
    def main(X: T.Tensor((ROWS, COLS + offset), src_dtype), Y: T.Tensor((ROWS, COLS), dst_dtype)):
        with T.Kernel(1, threads=128) as _:
            a = T.alloc_shared((ROWS, COLS), src_dtype)
            b = T.alloc_shared((ROWS, COLS), dst_dtype)
            T.copy(X[0:ROWS, offset:offset + COLS], a)
            T.copy(a, b)
            T.copy(b, Y)
    return main


CASES = [("float8_e4m3fn", "bfloat16", 0), ("float8_e4m3fn", "float16", 0), ("float16", "float32", 0),
         ("float32", "bfloat16", 0), ("bfloat16", "float32", 3)]   # offset 3: the first (same-type) copy starts off a vector boundary


def _input(src_dtype, offset, device):
    x = torch.randn(ROWS, COLS + offset, device=device) * 4
    return x.to(getattr(torch, src_dtype))


@pytest.mark.parametrize("src, dst, offset", CASES)
def test_a_converting_tile_copy(build, device, src, dst, offset):
    x = _input(src, offset, device)
    y = build(widen, src, dst, offset)(x)
    assert torch.equal(y, x[:, offset:].to(getattr(torch, dst)))


@pytest.mark.parametrize("src, dst, offset", CASES[:3])
def test_a_converting_tile_copy_with_the_threads_emulated(src, dst, offset):
    x = _input(src, offset, "cpu")
    k = tilelang.compile(widen.fn(src, dst, offset), out_idx=[-1], target="cpu", pass_configs={"tc.cpu_threads": True})
    assert torch.equal(k(x), x[:, offset:].to(getattr(torch, dst)))


@pytest.mark.cuda_compile
def test_the_converting_copy_is_one_vector_per_16_bytes_on_cuda():
    k = tilelang.compile(widen.fn("float8_e4m3fn", "bfloat16"), out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"})
    assert "tc::vec_convert<tc::bfloat16_t, tc::fp8_e4m3_t, 8>" in k.get_kernel_source()

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


def _every_fp8_code(device):
    """ROWS x COLS e4m3 values: all 256 codes (zeros, subnormals, the largest, both NaNs) in every row's
    first 256 columns, then the same codes with only the words holding a NaN code replaced by ones, so
    that vectors with and without a NaN both occur."""
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    clean = codes.clone()
    for w in range(0, 256, 4):
        if any(c & 0x7F == 0x7F for c in range(w, w + 4)):
            clean[w:w + 4] = 0x38                      # 1.0
    row = torch.cat([codes, clean]).repeat(COLS // 512)
    return row.repeat(ROWS, 1).view(torch.float8_e4m3fn).to(device)


@pytest.mark.parametrize("dst", ["bfloat16", "float16"])
def test_every_fp8_value_widens_exactly(build, device, dst):
    """The widening copy bit for bit against torch's conversion over every e4m3 code (NaN as any NaN):
    on CUDA (sm_89+) by the paired cvt (e4m3x2 -> f16x2, then f32 -> bf16x2 for bf16), its words staged
    in registers: byte order within the pairs, subnormals, signed zeros and NaN are what could go wrong."""
    x = _every_fp8_code(device)
    y = build(widen, "float8_e4m3fn", dst)(x)
    ref = x.to(getattr(torch, dst))
    nan = torch.isnan(ref)
    assert torch.equal(torch.isnan(y), nan)
    assert torch.equal(y[~nan].view(torch.int16), ref[~nan].view(torch.int16))


@pytest.mark.cuda_compile
def test_the_converting_copy_is_one_vector_per_16_bytes_on_cuda():
    """...and a thread loads all its vectors before it converts and stores any (ptxas does not move a load
    past the previous store to another tile: one shared-load latency per vector otherwise)."""
    k = tilelang.compile(widen.fn("float8_e4m3fn", "bfloat16"), out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"})
    lines = k.get_kernel_source().splitlines()
    loads = [i for i, ln in enumerate(lines) if "tc::vec_load_zfill<tc::fp8_e4m3_t, tc::fp8_e4m3_t, 8>" in ln]
    stores = [i for i, ln in enumerate(lines) if "tc::vec_store<tc::bfloat16_t, tc::fp8_e4m3_t, 8>" in ln]
    assert len(loads) == len(stores) == 1 and loads[0] < stores[0]      # two unrolled loops, loads first
    assert any("tc::fp8_e4m3_t cvt_stage" in ln and "[64];" in ln for ln in lines)   # 8 vectors of 8 a thread


# ---- a converting copy from global memory over a tensor's edge (fuzzer: seeds 2006 / 2008 / 2018 on the H200) --
RAGGED_ROWS, TILE_ROWS = 19, 16


@tilelang.jit(out_idx=[-1])
def ragged_column_sums():
    """Y[b, :] = sum over the rows of block b's tile of X (fp16 in global, an fp32 shared tile): the second
    block's tile reaches past X's 19 rows, and those rows must read as zeros.  Before the fix the vector
    copy (`tc::vec_convert`) skipped them, and the sums took whatever the shared memory held."""
    @T.prim_func
    def main(X: T.Tensor((RAGGED_ROWS, 64), "float16"), Y: T.Tensor((2, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            tile = T.alloc_shared((TILE_ROWS, 64), "float32")
            sums = T.alloc_fragment((64,), "float32")
            T.copy(X[bx * TILE_ROWS, 0], tile)
            T.reduce_sum(tile, sums, dim=0)
            T.copy(sums, Y[bx, 0])
    return main


def _ragged_reference(x):
    full = torch.zeros(2 * TILE_ROWS, 64)
    full[:RAGGED_ROWS] = x.float().cpu()
    return full.view(2, TILE_ROWS, 64).sum(1)


def test_a_converting_copy_past_the_tensor_reads_zeros(build, device):
    x = torch.randn(RAGGED_ROWS, 64, device=device).half()
    y = build(ragged_column_sums)(x)
    torch.testing.assert_close(y.cpu(), _ragged_reference(x), rtol=1e-4, atol=1e-3)


def test_a_converting_copy_past_the_tensor_reads_zeros_with_the_threads_emulated():
    """The CUDA lowering itself, on the CPU: shared memory starts as NaN bytes there (as undefined as on a
    GPU), so a skipped vector shows as NaN instead of a lucky zero."""
    x = torch.randn(RAGGED_ROWS, 64).half()
    k = tilelang.compile(ragged_column_sums.fn(), out_idx=[-1], target="cpu", pass_configs={"tc.cpu_threads": True})
    torch.testing.assert_close(k(x), _ragged_reference(x), rtol=1e-4, atol=1e-3)


@pytest.mark.cuda_compile
def test_the_ragged_converting_copy_is_predicated_on_cuda():
    src = tilelang.compile(ragged_column_sums.fn(), out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"}).get_kernel_source()
    line = next(ln for ln in src.splitlines() if "tc::vec_load_zfill<tc::half_t, tc::half_t" in ln)   # staged: loads first
    assert line.rstrip().endswith("< 19));"), line   # the row bound is the call's predicate, not an `if` around it
    assert "if (" not in line

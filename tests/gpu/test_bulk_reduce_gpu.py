"""The TMA bulk reduce-add of a shared tile (tests/cuda/test_bulk_reduce_compile.py) on the GPU against the
torch reference of tests/cpu/test_bulk_reduce.py: overlapping ragged rows from many blocks, the tile
rewritten in a loop, a destination that is not 16-byte aligned (the element-atomic fallback inside
tc::bulk_reduce_add), and a kernel that reads its destination back."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_bulk_reduce import TORCH, inputs, reference, scatter_add  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("aligned", [True, False])
def test_bulk_reduce_adds_every_row_once_on_gpu(dtype, aligned, strided):
    B, R, N, bm, step, iters = 96, 700, 128, 64, 7, 4     # ~9 blocks add into each row
    x, y = inputs(B, R, N, bm, iters, dtype, seed=int(aligned), strided=strided)
    want = reference(x, y, step)
    k = tilelang.compile(scatter_add(B, R, N, bm, step, iters, dtype, strided=strided), target="cuda")
    yd = y.cuda()
    if not aligned:   # a view one element into its storage: 2 or 4 bytes off 16
        yd = torch.cat([torch.zeros(1, dtype=TORCH[dtype]), y.flatten()]).cuda()[1:].view(y.shape)
        assert yd.data_ptr() % 16
    body = k.get_kernel_source()
    assert ("tc::bulk_reduce_add<" in body) == strided and ("tc::bulk_reduce_add_n(" in body) != strided
    k(x.cuda(), yd, torch.zeros(B, bm, N, dtype=TORCH[dtype], device="cuda"))
    assert torch.equal(yd.cpu().double(), want)


def test_a_kernel_reading_its_destination_sees_its_own_adds_on_gpu():
    B, R, N, bm, step, iters = 1, 64, 64, 32, 0, 3        # one block: its read-back follows all its adds
    x, y = inputs(B, R, N, bm, iters, "float32", seed=3)
    z = torch.zeros(B, bm, N, device="cuda")
    yd = y.cuda()
    tilelang.compile(scatter_add(B, R, N, bm, step, iters, read_back=True), target="cuda")(x.cuda(), yd, z)
    want = reference(x, y, step)
    assert torch.equal(yd.cpu().double(), want)
    assert torch.equal(z[0].cpu().double(), want[:bm])


@pytest.mark.parametrize("threads", [128, 256])
def test_a_swizzled_accumulator_tile_adds_every_row_once_on_gpu(threads):
    """cuda_ops/tma_reduce.py's form (the tile in the 128-byte swizzle, TMA tensor reduces; blocks past the
    tensor's end) against the exact reference."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
    from test_bulk_reduce_compile import dq_like
    from test_bulk_reduce import dq_like_reference
    g = torch.Generator().manual_seed(7)
    a = torch.randint(-3, 4, (16, 64, 64), generator=g).half()
    b = torch.randint(-3, 4, (64, 128), generator=g).half()
    k = tilelang.compile(dq_like(blocks=16, threads=threads, R=260), target="cuda")
    assert "tc::tma_reduce_add_tile(" in k.get_kernel_source()
    y = torch.zeros(260, 128, device="cuda")
    k(a.cuda(), b.cuda(), y, torch.zeros(64, 128, device="cuda"))
    assert torch.equal(y.cpu().double(), dq_like_reference(a, b, 260))

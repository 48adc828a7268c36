"""TVM's low-level constructs on the GPU (compile-only and CPU-target twin:
tests/language/test_lowlevel.py): the lop3 float16 decoder (PTX) pasted in with T.import_source
and called with T.call_extern, in a gemv whose threads combine their partial sums with
T.tvm_thread_allreduce, against torch on fresh random weights; the allreduce alone over
threadIdx.x and threadIdx.y groups."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang
from tilecraft.quantize.utils import interleave_weight

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from test_lowlevel import allreduce_program, decode_program, fields, gemv_program, shared_extern_program  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("fmt", ["uint", "int"])
def test_lop3_decoder_on_gpu(fmt):
    N, K = 16, 256
    b = torch.randint(-128, 128, (N, K // 2), dtype=torch.int8)
    k = tilelang.compile(decode_program(N, K, fmt), out_idx=[1], target="cuda")
    out = k(interleave_weight(b, 4, "float16").cuda()).cpu()
    torch.testing.assert_close(out, torch.from_numpy(fields(b.numpy(), fmt == "int")).half(), rtol=0, atol=0)


@pytest.mark.parametrize("fmt", ["uint", "int"])
@pytest.mark.parametrize("threads", [(32, 4), (16, 8)], ids=["32x4", "16x8"])
def test_gemv_with_extern_decoder_and_thread_allreduce(fmt, threads):
    N, K = 256, 1024
    a = torch.randn(K, dtype=torch.float16, device="cuda")
    b = torch.randint(-128, 128, (N, K // 2), dtype=torch.int8)
    c = torch.empty(N, dtype=torch.float32, device="cuda")
    k = tilelang.compile(gemv_program(N, K, fmt, threads=threads), target="cuda")
    k(a, interleave_weight(b, 4, "float16").cuda(), c)
    w = torch.from_numpy(fields(b.numpy(), fmt == "int")).float().cuda()
    torch.testing.assert_close(c, w @ a.float(), rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("case", [((32, 4), "x", "sum"), ((8, 4), "y", "max"), ((16, 2), "x", "max")],
                         ids=lambda c: f"{c[0][0]}x{c[0][1]}-{c[1]}-{c[2]}")
def test_thread_allreduce(case):
    threads, axis, op = case
    x = torch.randn(threads[1], threads[0], device="cuda")
    y = torch.empty_like(x)
    tilelang.compile(allreduce_program(threads, axis, op), target="cuda")(x, y)
    dim = 1 if axis == "x" else 0
    r = x.sum(dim, keepdim=True) if op == "sum" else x.amax(dim, keepdim=True)
    torch.testing.assert_close(y, r.expand_as(x), rtol=1e-5, atol=1e-5)


def test_extern_calls_around_shared_tiles():
    x = torch.randn(128, device="cuda")
    y, z = torch.empty_like(x), torch.empty(1, device="cuda")
    tilelang.compile(shared_extern_program(), target="cuda")(x, y, z)
    torch.testing.assert_close(y, 2 * torch.arange(128.0, device="cuda"))
    torch.testing.assert_close(z, x.sum(0, keepdim=True), rtol=1e-5, atol=1e-4)

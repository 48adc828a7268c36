"""`T.Tensor([n], T.ptr)` tables of addresses and `T.make_tensor(ptrs[i], shape, dtype)`: a grouped GEMM
over separate tensors (the shape of TileLang's grouped_gemm_fwd_ptr example) on the CPU target against
torch, compiled for sm_80 and sm_90a (plain loads: a tensor at a run-time address has no TMA descriptor)."""
from __future__ import annotations

import math

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


def grouped(sizes, K, N, bm=32, bn=32, bk=32):
    G, max_M = len(sizes), max(sizes)
    offs = [0]
    for s in sizes[:-1]:
        offs.append(offs[-1] + math.ceil(s / bm))
    total = sum(math.ceil(s / bm) for s in sizes)

    @T.prim_func
    def kernel(A_ptrs: T.Tensor([G], T.ptr), B_ptrs: T.Tensor([G], T.ptr), C_ptrs: T.Tensor([G], T.ptr),
               tile_offs: T.Tensor([G], T.int32)):
        with T.Kernel(total, T.ceildiv(N, bn), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            g = T.alloc_var(T.int32)
            off = T.alloc_var(T.int32)
            g = 0
            off = 0
            for i in range(G):
                inb = bx >= tile_offs[i]
                g = T.if_then_else(inb, i, g)
                off = T.if_then_else(inb, tile_offs[i], off)
            m0 = (bx - off) * bm
            A = T.make_tensor(A_ptrs[g], (max_M, K), "float16")
            B = T.make_tensor(B_ptrs[g], (K, N), "float16")
            C = T.make_tensor(C_ptrs[g], (max_M, N), "float16")
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=1):
                T.copy(A[m0, ko * bk], A_s)
                T.copy(B[ko * bk, by * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[m0, by * bn])
    return kernel, offs


def _ptrs(ts):
    return torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64)


def test_grouped_gemm_through_address_tables_on_cpu():
    sizes, K, N = [40, 64, 17], 64, 64
    prog, offs = grouped(sizes, K, N)
    k = tilelang.compile(prog, target="cpu")
    a = [torch.randn(max(sizes), K).half() for _ in sizes]
    b = [torch.randn(K, N).half() for _ in sizes]
    c = [torch.full((max(sizes), N), 7.0).half() for _ in sizes]
    k(_ptrs(a), _ptrs(b), _ptrs(c), torch.tensor(offs, dtype=torch.int32))
    for s, x, y, z in zip(sizes, a, b, c):
        torch.testing.assert_close(z[:s].float(), x[:s].float() @ y.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_compiles_for_cuda(arch):
    prog, _ = grouped([40, 64, 17], 64, 64)
    src = tilelang.compile(prog, target={"kind": "cuda", "arch": arch}).get_kernel_source()
    assert "a tensor at an address" in src


def test_the_address_must_be_64_bit():
    with pytest.raises(tilelang.TilecraftError, match="the address is a 64-bit integer"):
        @T.prim_func
        def main(P: T.Tensor([4], T.int32)):
            with T.Kernel(1, threads=32) as bx:
                A = T.make_tensor(P[0], (8,), "float32")
                A[0] = 1.0

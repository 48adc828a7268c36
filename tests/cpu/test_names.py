"""Name hygiene: whatever the user calls a variable, a buffer or a symbol, the generated code gives
every one of them its own C identifier (codegen/names.py).  Each program here once meant, or could
have meant, two things sharing one C name -- a silent wrong answer, or a compile error in code the
user never wrote.  They run on every target (tests/cpu/conftest.py) and are checked against torch.
"""
from __future__ import annotations

import re

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.codegen.names import CNames
from tilecraft.ir import Buffer, Var
from tilecraft.ir.expr import thread_index


# ---- the reported case: a pipelined loop variable named like the dynamic K ------------------------

@tilelang.jit(out_idx=[-1])
def gemm_loop_named_like_k(block_M=32, block_N=32, block_K=32, stages=2):
    # TileLang's dynamic-shape example: the symbol and the loop variable are both `k`.
    M, N, K = T.dynamic("m"), T.dynamic("n"), T.dynamic("k")

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_f = T.alloc_fragment((block_M, block_N), "float")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * block_M, bx * block_N])
    return main


@pytest.mark.parametrize("m,n,k", [(64, 64, 96), (40, 70, 33)])
def test_loop_variable_named_like_the_dynamic_k(build, device, m, n, k):
    kern = build(gemm_loop_named_like_k)
    a = torch.randn(m, k, device=device).half()
    b = torch.randn(k, n, device=device).half()
    ref = a.float() @ b.float()
    out = kern(a, b)
    assert ((out - ref).norm() / ref.norm()).item() < 1e-3


# ---- relatives: a buffer named like a symbol, names C or CUDA already uses ---------------------------

@tilelang.jit(out_idx=[-1])
def buffer_named_like_a_symbol(block=16):
    N = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            n = T.alloc_fragment((block,), "float32")       # the buffer `n`, the symbol "n"
            for i in T.Parallel(block):
                n[i] = T.if_then_else(bx * block + i < N, X[bx * block + i], 0.0)
            for i in T.Parallel(block):
                if bx * block + i < N:
                    Y[bx * block + i] = n[i] * 2.0 + N
    return main


@pytest.mark.parametrize("size", [5, 37])
def test_buffer_named_like_a_symbol(build, device, size):
    x = torch.randn(size, device=device)
    torch.testing.assert_close(build(buffer_named_like_a_symbol)(x), x * 2 + size)


@tilelang.jit(out_idx=[-1])
def reserved_names(M, N):
    # every name below means something to C++, CUDA, the header library or our own generated code
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as tc_tid:
            threadIdx = T.alloc_shared((M, N), "float32")
            tc_smem = T.alloc_fragment((M, N), "float32")
            T.copy(X, threadIdx)
            for int, float in T.Parallel(M, N):
                tc_smem[int, float] = threadIdx[int, float] + int * 100 + float
            for new, tc in T.Parallel(M, N):
                Y[new, tc] = tc_smem[new, tc] * 2.0 + tc_tid
    return main


def test_cpp_keywords_cuda_builtins_and_our_own_names(build, device):
    x = torch.randn(8, 16, device=device)
    i = torch.arange(8.0, device=device)[:, None]
    j = torch.arange(16.0, device=device)[None, :]
    torch.testing.assert_close(build(reserved_names, 8, 16)(x), (x + i * 100 + j) * 2)


@tilelang.jit(out_idx=[-1])
def names_like_generated_ones(N):
    # `i1`, `r2`, `acc1` are what the lowerings call their own temporaries
    @T.prim_func
    def main(X: T.Tensor((N, N), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            i1 = T.alloc_fragment((N, N), "float32")
            acc1 = T.alloc_fragment((N,), "float32")
            T.copy(X, i1)
            for r1, r2 in T.Parallel(N, N):
                i1[r1, r2] = i1[r1, r2] * (r2 + 1)
            T.reduce_sum(i1, acc1, dim=1)
            T.copy(acc1, Y)
    return main


def test_names_like_the_lowerings_temporaries(build, device):
    x = torch.randn(16, 16, device=device)
    ref = (x * torch.arange(1.0, 17.0, device=device)).sum(1)
    torch.testing.assert_close(build(names_like_generated_ones, 16)(x), ref, rtol=1e-5, atol=1e-5)


@tilelang.jit(out_idx=[-1])
def unicode_names(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            for é in T.Parallel(N):
                Y[é] = X[é] + é
    return main


def test_unicode_names(build, device):
    x = torch.randn(9, device=device)
    torch.testing.assert_close(build(unicode_names, 9)(x), x + torch.arange(9.0, device=device))


# ---- the namer itself ----------------------------------------------------------------------------------

def test_namer_gives_every_node_its_own_legal_identifier():
    names = CNames()
    a, b, c = Var("k"), Var("k"), Var("k_1")
    got = [names(a), names(b), names(c), names(a)]
    assert got[0] == "k" and got[3] == "k"            # the same node keeps its name
    assert len(set(got[:3])) == 3                      # different nodes never share one
    for raw in ("int", "threadIdx", "tc_tid", "tc", "__x", "_Y", "std", "café", "min"):
        ident = names(Var(raw))
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", ident) and ident != raw, (raw, ident)
    assert names(Buffer("A", (4,), "float32", "shared")) == "A"
    assert names(thread_index()) == "tc_tid"           # the printer's own name, printed as is

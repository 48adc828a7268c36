"""T.annotate_safe_value and T.annotate_padding, TileLang's meaning (ir/oob.py), on every target (see
conftest.py: CPU against torch, compiled for sm_90a; tests/cuda/test_oob_values_compile.py compiles
them for sm_80 and sm_90a and checks which copy paths they take).

A read past the edge of a global tensor gives its safe value (0 without one); an element of a
shared / register tile filled from outside its source gets the tile's padding.  They were accepted
and ignored: the out-of-range elements read 0.
"""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

M, N, BM, BN = 100, 72, 32, 32


@tilelang.jit(out_idx=[-1])
def tile_copy(safe, into="shared"):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((128, 96), "float32")):
        with T.Kernel(3, 4, threads=128) as (bx, by):
            T.annotate_safe_value({A: safe})
            if into == "shared":
                S = T.alloc_shared((BM, BN), "float32")
                T.copy(A[by * BM, bx * BN], S)          # ragged at the right and bottom edges
                T.copy(S, B[by * BM, bx * BN])
            else:
                F = T.alloc_fragment((BM, BN), "float32")
                T.copy(A[by * BM, bx * BN], F)
                T.copy(F, B[by * BM, bx * BN])
    return main


@pytest.mark.parametrize("into", ["shared", "fragment"])
def test_safe_value_fills_a_ragged_tile_copy(build, device, into):
    a = torch.randn(M, N, device=device)
    want = torch.full((128, 96), -7.5, device=device)
    want[:M, :N] = a
    assert torch.equal(build(tile_copy, -7.5, into)(a), want)


@tilelang.jit(out_idx=[-1])
def shifted_reads(n=200, shift=37):
    @T.prim_func
    def main(A: T.Tensor((n,), "int32"), B: T.Tensor((n,), "int32")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            T.annotate_safe_value({A: 1234})
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    B[bx * 64 + i] = A[bx * 64 + i + shift] + A[bx * 64 + i - shift]
    return main


def test_safe_value_of_element_reads_on_both_edges(build, device):
    n, shift = 200, 37
    a = torch.randint(-1000, 1000, (n,), device=device, dtype=torch.int32)
    pad = torch.full((shift,), 1234, device=device, dtype=torch.int32)
    ext = torch.cat([pad, a, pad])
    want = ext[2 * shift:] + ext[:n]
    assert torch.equal(build(shifted_reads, n, shift)(a), want)


@tilelang.jit(out_idx=[-1])
def padded_tile(pad, by_copy):
    """TileLang's annotate_padding example: the tile reads 10 rows above its block (negative rows at
    the top edge) and the padded elements get `pad`."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            S = T.alloc_shared((BM, BN), "float32")
            T.annotate_padding({S: pad})
            if by_copy:
                T.copy(A[by * BM - 10, bx * BN], S)
            else:
                for i, j in T.Parallel(BM, BN):
                    S[i, j] = A[by * BM + i - 10, bx * BN + j]
            for i, j in T.Parallel(BM, BN):
                if by * BM + i < M and bx * BN + j < N:
                    B[by * BM + i, bx * BN + j] = S[i, j]
    return main


@pytest.mark.parametrize("by_copy", [False, True], ids=["parallel", "copy"])
def test_padding_fills_a_shared_tile_from_outside_its_source(build, device, by_copy):
    a = torch.randn(M, N, device=device)
    want = torch.full((M, N), 3.25, device=device)
    want[10:] = a[:M - 10]
    # rows whose source row is past the bottom edge are never stored (M - 10 + 10 = M)
    assert torch.equal(build(padded_tile, 3.25, by_copy)(a), want)


@tilelang.jit(out_idx=[-1])
def ragged_gemm(Mg=64, Ng=64, K=72, bk=32, stages=2):
    @T.prim_func
    def main(A: T.Tensor((Mg, K), "float16"), B: T.Tensor((K, Ng), "float16"), C: T.Tensor((Mg, Ng), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            As = T.alloc_shared((Mg, bk), "float16")
            Bs = T.alloc_shared((bk, Ng), "float16")
            acc = T.alloc_fragment((Mg, Ng), "float32")
            T.annotate_safe_value({A: 1.0, B: 2.0})
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[0, k * bk], As)
                T.copy(B[k * bk, 0], Bs)
                T.gemm(As, Bs, acc)
            T.copy(acc, C)
    return main


def test_safe_values_enter_a_pipelined_gemm_past_k(build, device):
    """The K tail past the tensors reads A as 1 and B as 2: each output gains 2 per padded k."""
    a = (torch.randn(64, 72, device=device) / 4).half()
    b = (torch.randn(72, 64, device=device) / 4).half()
    want = a.float() @ b.float() + 2.0 * (96 - 72)
    torch.testing.assert_close(build(ragged_gemm)(a, b), want, rtol=1e-3, atol=1e-3)


def test_zero_safe_value_changes_nothing():
    src0 = tilelang.compile(tile_copy.fn(0.0), out_idx=[-1], target="cpu").get_kernel_source()
    assert "? A[" in src0 and ": 0.0f)" in src0


@pytest.mark.parametrize("call,match", [
    ("T.annotate_safe_value({S: 1.0})", "S is a shared buffer; the keys are global buffers"),
    ("T.annotate_padding({A: 1.0})", "A is a global buffer; the keys are shared or fragment or local buffers"),
    ("T.annotate_safe_value([A])", "expects a dict"),
    ("T.annotate_safe_value({A: 'x'})", "must be a number or a kernel value"),
])
def test_annotation_mistakes_are_errors(call, match):
    import linecache
    src = f'''
import tilecraft.language as T
@T.prim_func
def main(A: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((64,), "float32")
        {call}
'''
    name = f"<oob-{abs(hash(call))}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    with pytest.raises(TilecraftError, match=match) as info:
        exec(compile(src, name, "exec"), {})
    assert info.value.span is not None and info.value.span.line == 7

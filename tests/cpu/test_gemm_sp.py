"""2:4 structured-sparse GEMM (`T.gemm_sp`, `T.gemm_sp_v2`) and its host side
(`tilecraft.utils.sparse`), on every target (conftest.py: cpu, cuda, cuda-compile) against torch.

- compression: E and A_sparse bit for bit against a plain-loop encoder written here from the format's
  definition (utils/sparse.py docstring), for every E dtype; round trips through `decompress`,
  transposed too, and groups with fewer than 2 non-zeros;
- kernels: C = decompress(A_sparse, E) @ B on fresh random semi-sparse inputs, pipelined over K,
  several blocks, each E dtype (uint8 / int16 / int32 for 8-bit data), transpose_A / transpose_B,
  bfloat16, gemm_sp_v2, a kernel-written E (the format a TileLang program's own compressor writes).
"""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError
from tilecraft.layout import make_cutlass_metadata_layout
from tilecraft.utils.sparse import (arange_semi_sparse, compress, compress_sm80, compress_sm90, decompress,
                                    randint_semi_sparse, randn_semi_sparse)

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "int8": torch.int8}
META = {"uint8": torch.uint8, "int16": torch.int16, "int32": torch.int32}
ARCH = {"uint8": "9.0", "int16": "8.0", "int32": "8.0"}


# ---- compression ----------------------------------------------------------------------------------

def loop_encoder(dense: torch.Tensor, bits: int):
    """The format by its definition, one group at a time (exactly 2 non-zeros per group)."""
    m, k = dense.shape
    sparse = torch.zeros(m, k // 2, dtype=dense.dtype)
    words = [[0] * (k // bits) for _ in range(m)]
    for r in range(m):
        for q in range(k // 4):
            pos = [p for p in range(4) if dense[r, 4 * q + p] != 0]
            assert len(pos) == 2
            sparse[r, 2 * q], sparse[r, 2 * q + 1] = dense[r, 4 * q + pos[0]], dense[r, 4 * q + pos[1]]
            words[r][q // (bits // 4)] |= (pos[0] | pos[1] << 2) << (4 * (q % (bits // 4)))
    signed = [[w - (1 << bits) if bits > 8 and w >= 1 << (bits - 1) else w for w in row] for row in words]
    return sparse, signed


@pytest.mark.parametrize("meta,dtype", [("uint8", "float16"), ("int16", "float16"), ("int16", "bfloat16"),
                                        ("int32", "int8")])
def test_compress_matches_loop_encoder(meta, dtype):
    m, k = 8, 64
    if dtype == "int8":   # non-zero values in the kept positions, so the count is exactly 2
        a = randint_semi_sparse(m, k, 1, 100, dtype=torch.int8, device="cpu")
    else:
        a = randn_semi_sparse(m, k, dtype=TORCH[dtype], device="cpu")
    s, e = compress(a, transposed=False, arch=ARCH[meta])
    assert e.dtype == META[meta] and e.shape == (m, k // META[meta].itemsize // 8)
    ref_s, ref_words = loop_encoder(a, META[meta].itemsize * 8)
    assert torch.equal(s, ref_s)
    assert e.tolist() == ref_words
    assert torch.equal(decompress(s, e), a)


def test_compress_round_trip_transposed_sparse_groups_and_errors():
    a = randn_semi_sparse(64, 128, dtype=torch.float16, device="cpu")
    a[3, 8:12] = 0                      # a group with no non-zero
    a[5, 16:20] = torch.tensor([0, 0, 0, 1.5])   # one non-zero, in the last position
    s, e = compress_sm90(a, block_k=64)
    assert torch.equal(decompress(s, e), a)
    s2, e2 = compress_sm80(a)
    assert torch.equal(decompress(s2, e2), a)
    at = a.t().contiguous()             # (K, M), sparse along K
    st, et = compress(at, transposed=True, arch="9.0")
    assert st.shape == (64, 64) and torch.equal(st, s.t()) and torch.equal(et, e)
    assert torch.equal(decompress(st, et, transposed=True), at)
    bad = a.clone()
    bad[1, 0:4] = 1.0
    with pytest.raises(ValueError, match="row 1, k 0..3 holds 4 non-zeros"):
        compress(bad, arch="9.0")
    with pytest.raises(ValueError, match="block_k=48 must divide K=128"):
        compress(a, arch="9.0", block_k=48)


def test_semi_sparse_generators_keep_two_of_four():
    for t in (randn_semi_sparse(16, 32, device="cpu"), arange_semi_sparse(16, 32, device="cpu"),
              randint_semi_sparse(16, 32, 1, 9, dtype=torch.int32, device="cpu")):
        assert ((t.reshape(16, 8, 4) != 0).sum(-1) <= 2).all()
        assert ((t.reshape(16, 8, 4) != 0).sum(-1) == 2).float().mean() > 0.9
    assert randn_semi_sparse(16, 32, device="cpu", transposed=True).shape == (32, 16)


# ---- kernels --------------------------------------------------------------------------------------

@tilelang.jit(out_idx=[-1])
def gemm_sp_kernel(M, N, K, bm, bn, bk, dtype="float16", meta="uint8", trans_A=False, trans_B=False,
                   stages=2, v2=False, annotate=True, accum="float32", threads=128, out=None, policy="Square"):
    eb = int(meta[-2:]) if meta != "uint8" else 8
    A_shape, A_tile = ((K // 2, M), (bk // 2, bm)) if trans_A else ((M, K // 2), (bm, bk // 2))
    B_shape, B_tile = ((N, K), (bn, bk)) if trans_B else ((K, N), (bk, bn))

    @T.prim_func
    def main(A_sparse: T.Tensor(A_shape, dtype), E: T.Tensor((M, K // eb), meta), B: T.Tensor(B_shape, dtype),
             C: T.Tensor((M, N), out or accum)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            a_s = T.alloc_shared(A_tile, dtype)
            e_s = T.alloc_shared((bm, bk // eb), meta)
            b_s = T.alloc_shared(B_tile, dtype)
            acc = T.alloc_fragment((bm, bn), accum)
            if annotate:
                T.annotate_layout({E: make_cutlass_metadata_layout(E, mma_dtype=dtype, block_k=bk),
                                   e_s: make_cutlass_metadata_layout(e_s, mma_dtype=dtype, block_k=bk)})
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                if trans_A:
                    T.copy(A_sparse[k * bk // 2, by * bm], a_s)
                else:
                    T.copy(A_sparse[by * bm, k * bk // 2], a_s)
                T.copy(E[by * bm, k * bk // eb], e_s)
                if trans_B:
                    T.copy(B[bx * bn, k * bk], b_s)
                else:
                    T.copy(B[k * bk, bx * bn], b_s)
                if v2:
                    T.gemm_sp_v2(a_s, e_s, b_s, acc, trans_A, trans_B, policy=T.GemmWarpPolicy(policy))
                else:
                    T.gemm_sp(a_s, e_s, b_s, acc, trans_A, trans_B, policy=T.GemmWarpPolicy(policy))
            T.copy(acc, C[by * bm, bx * bn])
    return main


def operands(M, N, K, dtype, meta, trans_A, trans_B, device):
    if dtype == "int8":
        a = randint_semi_sparse(M, K, -8, 8, dtype=torch.int8, device="cpu")
        b = torch.randint(-8, 8, (K, N), dtype=torch.int8)
    else:
        a = randn_semi_sparse(M, K, dtype=TORCH[dtype], device="cpu")
        b = torch.randn(K, N).to(TORCH[dtype])
    s, e = compress(a.t().contiguous() if trans_A else a, transposed=trans_A, arch=ARCH[meta])
    assert e.dtype == META[meta]
    bb = b.t().contiguous() if trans_B else b
    ref = a.to(torch.float64) @ b.to(torch.float64)
    return s.to(device), e.to(device), bb.to(device), ref


CASES = [  # M, N, K, bm, bn, bk, dtype, meta, trans_A, trans_B, v2
    (128, 128, 256, 64, 64, 64, "float16", "uint8", False, False, False),
    (128, 128, 256, 64, 64, 128, "float16", "int16", False, False, False),
    (64, 128, 256, 64, 64, 64, "bfloat16", "uint8", False, True, False),
    (128, 64, 128, 64, 64, 64, "float16", "uint8", True, False, False),
    (128, 64, 256, 64, 64, 64, "float16", "int16", False, False, True),
]


@pytest.mark.parametrize("M,N,K,bm,bn,bk,dtype,meta,tA,tB,v2", CASES,
                         ids=["fp16-u8", "fp16-i16-bk128", "bf16-u8-tB", "fp16-tA", "fp16-v2"])
def test_gemm_sp_matches_dense_product(build, device, M, N, K, bm, bn, bk, dtype, meta, tA, tB, v2):
    kernel = build(gemm_sp_kernel, M, N, K, bm, bn, bk, dtype, meta, tA, tB, 2, v2)
    for _ in range(2):
        s, e, b, ref = operands(M, N, K, dtype, meta, tA, tB, device)
        c = kernel(s, e, b)
        torch.testing.assert_close(c.double().cpu(), ref, rtol=1e-2, atol=1e-2)


def test_gemm_sp_int8_int32_metadata(build, device):
    kernel = build(gemm_sp_kernel, 64, 64, 128, 64, 64, 64, "int8", "int32", accum="int32")
    s, e, b, ref = operands(64, 64, 128, "int8", "int32", False, False, device)
    assert torch.equal(kernel(s, e, b).cpu().to(torch.float64), ref)


@tilelang.jit(out_idx=[1, 2])
def compress_in_kernel(M, K, bm):
    """A compressor written in the language (as TileLang programs do): each row's groups scanned in
    order, positions ORed into int16 E with shifts; must agree bit for bit with utils.sparse."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), A_sp: T.Tensor((M, K // 2), "float16"), E: T.Tensor((M, K // 16), "int16")):
        with T.Kernel(T.ceildiv(M, bm), threads=bm) as bx:
            a_s = T.alloc_shared((bm, K), "float16")
            s_s = T.alloc_shared((bm, K // 2), "float16")
            e_s = T.alloc_shared((bm, K // 16), "int16")
            cnt = T.alloc_local((1,), "int32")
            T.copy(A[bx * bm, 0], a_s)
            T.clear(s_s)
            T.clear(e_s)
            for r in T.Parallel(bm):
                for q in T.serial(K // 4):
                    cnt[0] = 0
                    for p in T.serial(4):
                        if a_s[r, q * 4 + p] != 0:
                            s_s[r, q * 2 + cnt[0]] = a_s[r, q * 4 + p]
                            e_s[r, q // 4] |= T.shift_left(p, 4 * (q % 4) + 2 * cnt[0])
                            cnt[0] += 1
            T.copy(s_s, A_sp[bx * bm, 0])
            T.copy(e_s, E[bx * bm, 0])
    return main


def test_kernel_written_metadata_feeds_gemm_sp(build, device):
    M, N, K = 64, 64, 128
    a = randn_semi_sparse(M, K, dtype=torch.float16, device="cpu")
    s_ref, e_ref = compress(a, arch="8.0")
    s, e = build(compress_in_kernel, M, K, 32)(a.to(device))
    assert torch.equal(s.cpu(), s_ref) and torch.equal(e.cpu(), e_ref)
    b = torch.randn(K, N).half()
    c = build(gemm_sp_kernel, M, N, K, 64, 64, 64, "float16", "int16")(s, e, b.to(device))
    torch.testing.assert_close(c.cpu(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


# ---- errors ---------------------------------------------------------------------------------------

def test_gemm_sp_metadata_shape_error_names_buffer_and_line():
    with pytest.raises(TilecraftError) as ei:
        @T.prim_func
        def bad(A: T.Tensor((64, 64), "float16"), E: T.Tensor((64, 16), "uint8"), B: T.Tensor((128, 64), "float16"),
                C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                a_s = T.alloc_shared((64, 32), "float16")
                e_s = T.alloc_shared((64, 4), "uint8")
                b_s = T.alloc_shared((64, 64), "float16")
                acc = T.alloc_fragment((64, 64), "float32")
                T.gemm_sp(a_s, e_s, b_s, acc)
    msg = str(ei.value)
    assert "e_s" in msg and "(64, 8)" in msg and "(64, 4)" in msg and "test_gemm_sp.py" in msg, msg

"""Decode attention (tilecraft.kernels.decode) on the CPU target against an fp32 torch reference:
split-KV GQA decoding (contiguous and paged KV) with per-sequence lengths that end mid-block and splits
left empty, the combine kernel, and MLA decode (latent 512 + rope 64 is scaled down here to keep the CPU
tier fast: 128 + 32, same code) with the KV in bf16 and in fp8 e4m3 with a per-tensor scale, the latter also
by the hand warp-specialized kernel (`mla_decode_split_ws`) in the CPU target's thread-level mode."""
from __future__ import annotations

import pytest
import torch

from tilecraft.kernels import decode as D
from tilecraft.target import default_target


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    assert torch.isfinite(out).all()
    return ((out - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("paged", [False, True])
def test_gqa_split_kv_decode(paged):
    batch, heads, kv_heads, dim, seq_kv = 3, 8, 2, 64, 300
    q = torch.randn(batch, heads, dim).half()
    seqlens = torch.tensor([300, 1, 137], dtype=torch.int32)   # full, one token (3 of 4 splits empty), mid-block
    if paged:
        page_size, pages = 64, 16
        k, v = (torch.randn(pages, page_size, kv_heads, dim).half() for _ in range(2))
        table = torch.randperm(pages)[:batch * 5].view(batch, 5).to(torch.int32)   # 5 pages of 64 >= 300
    else:
        k, v = (torch.randn(batch, seq_kv, kv_heads, dim).half() for _ in range(2))
        table = None
    with default_target("cpu"):
        o = D.gqa_decode(q, k, v, seqlens, table, num_split=4, block_N=32)
    assert o.shape == (batch, heads, dim) and o.dtype == torch.float16
    assert rel_err(o, D.ref_gqa_decode(q, k, v, seqlens, table)) < 2e-3


@pytest.mark.parametrize("kv_dtype", ["bfloat16", "float8_e4m3fn"])
def test_mla_decode(kv_dtype):
    batch, heads, seq_kv, dim, pe_dim = 2, 20, 200, 128, 32
    q_nope, q_pe = torch.randn(batch, heads, dim).bfloat16(), torch.randn(batch, heads, pe_dim).bfloat16()
    kv, k_pe = torch.randn(batch, seq_kv, dim), torch.randn(batch, seq_kv, pe_dim).bfloat16()
    seqlens = torch.tensor([200, 77], dtype=torch.int32)
    scale = None
    if kv_dtype == "bfloat16":
        kv = kv.bfloat16()
    else:
        scale = (kv.abs().amax() / 448.0).reshape(1)
        kv = (kv / scale).to(torch.float8_e4m3fn)
    with default_target("cpu"):
        o = D.mla_decode(q_nope, q_pe, kv, k_pe, seqlens, scale, num_split=3, block_N=32, block_H=16)
    assert o.shape == (batch, heads, dim) and o.dtype == torch.bfloat16
    assert rel_err(o, D.ref_mla_decode(q_nope, q_pe, kv, k_pe, seqlens, scale)) < 1e-2



@pytest.mark.parametrize("threads", [False, True], ids=["tile", "thread-level"])
def test_mla_decode_fp8_transposed(threads):
    """mla_decode_split_t (S^T = KV Q^T and O^T += KV^T P^T, 64 KV rows a tile, the softmax down S^T's columns):
    on the CPU target's tile path and in its thread-level mode (the CUDA lowering: the cross-warp column
    reductions), 20 heads, lengths ending mid-tile, a split left empty."""
    import tilecraft
    batch, heads, seq_kv, dim, pe_dim = 2, 20, 300, 128, 32
    q_nope, q_pe = torch.randn(batch, heads, dim).bfloat16(), torch.randn(batch, heads, pe_dim).bfloat16()
    kv, k_pe = torch.randn(batch, seq_kv, dim), torch.randn(batch, seq_kv, pe_dim).bfloat16()
    seqlens = torch.tensor([300, 45], dtype=torch.int32)
    scale = (kv.abs().amax() / 448.0).reshape(1)
    kv = (kv / scale).to(torch.float8_e4m3fn)
    prog = D.mla_decode_split_t.get_tir(batch, heads, seq_kv, dim, pe_dim, 3, kv_dtype="float8_e4m3fn")
    split = tilecraft.compile(prog, out_idx=[-2, -1], target="cpu", pass_configs={"tc.cpu_threads": threads})
    o = D.decode_combine(batch, heads, 3, dim, dtype="bfloat16")(*split(q_nope, q_pe, kv, k_pe, scale, seqlens))
    assert rel_err(o, D.ref_mla_decode(q_nope, q_pe, kv, k_pe, seqlens, scale)) < 1e-2
    with default_target("cpu"):
        o = D.mla_decode(q_nope, q_pe, kv, k_pe, seqlens, scale, num_split=3, form="t", block_H=16)
    assert rel_err(o, D.ref_mla_decode(q_nope, q_pe, kv, k_pe, seqlens, scale)) < 1e-2

@pytest.mark.parametrize("widen_from,transposed", [("shared", False), ("regs", False), ("shared", True)])
def test_mla_decode_fp8_warp_specialized(widen_from, transposed):
    """mla_decode_split_ws (a producer warp group widens the fp8 tiles into a ring of two bf16 stages, the
    consumer warp group waits on its mbarriers; transposed: S^T and O^T on 64-row tiles): the branches wait on
    each other, so the CPU target runs the block's threads as fibers (the CUDA lowering itself); 20 heads (a
    partial second head block), lengths ending mid-tile and a split left empty."""
    import warnings
    batch, heads, seq_kv, dim, pe_dim = 2, 20, 300 if transposed else 200, 128, 32
    q_nope, q_pe = torch.randn(batch, heads, dim).bfloat16(), torch.randn(batch, heads, pe_dim).bfloat16()
    kv, k_pe = torch.randn(batch, seq_kv, dim), torch.randn(batch, seq_kv, pe_dim).bfloat16()
    seqlens = torch.tensor([200, 45], dtype=torch.int32)
    scale = (kv.abs().amax() / 448.0).reshape(1)
    kv = (kv / scale).to(torch.float8_e4m3fn)
    with default_target("cpu"), warnings.catch_warnings():
        warnings.simplefilter("ignore")   # T.set_max_nreg does not apply on the CPU target
        split = D.mla_decode_split_ws(batch, heads, seq_kv, dim, pe_dim, 3, widen_from=widen_from,
                                      transposed=transposed)
        assert "one fiber per CUDA thread" in split.get_kernel_source()
        o_part, lse = split(q_nope, q_pe, kv, k_pe, scale, seqlens)
        o = D.decode_combine(batch, heads, 3, dim, dtype="bfloat16")(o_part, lse)
        o2 = D.mla_decode(q_nope, q_pe, kv, k_pe, seqlens, scale, num_split=3, form="ws", block_H=16, block_N=32)
    ref = D.ref_mla_decode(q_nope, q_pe, kv, k_pe, seqlens, scale)
    assert rel_err(o, ref) < 1e-2 and rel_err(o2, ref) < 1e-2
    with pytest.raises(ValueError, match="fp8-KV form"):
        D.mla_decode(q_nope, q_pe, kv.float().bfloat16(), k_pe, seqlens, num_split=3, form="ws")

@pytest.mark.parametrize("num_split,dim,dtype,kw", [
    (64, 512, "bfloat16", {}),                                # MLA: 64 threads x 8 columns, 4 chunks of 16
    (40, 128, "float16", {}),                                 # chunks of 10
    (7, 64, "float16", {}),                                   # a prime count: chunks of 7
    (64, 512, "bfloat16", {"block_D": 128, "threads": 32, "chunk": 8}),   # the dim split over blocks
    (16, 96, "float32", {})])                                 # 4-column stores, dim not a power of two
def test_decode_combine_against_torch(num_split, dim, dtype, kw):
    batch, heads = 2, 3
    g = torch.Generator().manual_seed(num_split + dim)
    o_part = torch.randn(batch, heads, num_split, dim, generator=g)
    lse = torch.randn(batch, heads, num_split, generator=g) * 4
    lse[0, 0, 1:] = -1e30                                     # every split but the first empty
    w = torch.softmax(lse * torch.log(torch.tensor(2.0)), dim=-1)
    ref = (w.unsqueeze(-1) * o_part).sum(2)
    with default_target("cpu"):
        o = D.decode_combine(batch, heads, num_split, dim, dtype=dtype, **kw)(o_part, lse)
    assert o.dtype == getattr(torch, dtype)
    assert rel_err(o, ref) < 5e-3


def test_gqa_decode_refuses_heads_not_a_multiple_of_kv_heads():
    with pytest.raises(ValueError, match="heads=6 is not a multiple of kv_heads=4"):
        D.gqa_decode_split.fn(1, 6, 4, 128, 64)


def test_gqa_decode_with_many_splits_and_the_automatic_count():
    """40 splits (the combine streams them: more than the old all-in-registers form could hold), some empty;
    and num_split=None, which picks `decode_splits` for the shape (no empty split, >= 2 KV blocks each)."""
    batch, heads, kv_heads, dim, seq_kv = 2, 4, 1, 32, 1300
    q = torch.randn(batch, heads, dim).half()
    k, v = (torch.randn(batch, seq_kv, kv_heads, dim).half() for _ in range(2))
    seqlens = torch.tensor([1300, 333], dtype=torch.int32)
    ref = D.ref_gqa_decode(q, k, v, seqlens)
    with default_target("cpu"):
        assert rel_err(D.gqa_decode(q, k, v, seqlens, num_split=40, block_N=16), ref) < 2e-3
        assert rel_err(D.gqa_decode(q, k, v, seqlens, block_N=32), ref) < 2e-3


@pytest.mark.parametrize("blocks_per_split,seq_kv,sms,want", [
    (8, 65536, 132, 64),     # B1 H32/8: 66 wanted -> 16 KV blocks each -> 64 splits
    (2, 32768, 132, 256),    # MLA B1 H128 (2 head blocks): 264 wanted, at most 512 / 2 = 256
    (128, 8192, 132, 5),     # B16 H32/8: 5 splits of 26 blocks (the last 24)
    (512, 4096, 132, 2),     # B64 H32/8: 512 blocks, just under 4 per SM: 2 splits
    (8, 100, 132, 1)])       # two KV blocks: one split
def test_decode_splits(blocks_per_split, seq_kv, sms, want):
    n = D.decode_splits(blocks_per_split, seq_kv, 64, sms)
    _no_empty_split(n, seq_kv)
    assert n == want


@pytest.mark.parametrize("batch,heads,seq_kv,want", [
    (1, 128, 32768, 64),    # 2 head blocks: 66 wanted -> 8 KV blocks each -> 64 splits, 128 blocks (97 % of a wave)
    (64, 16, 8192, 4),      # 64 head blocks: 3 splits would be 1.45 waves (last 45 % full); 4: 256 blocks, 97 %
    (1, 64, 256, 2)])       # 4 KV blocks: at most 2 splits
def test_mla_decode_splits_fill_their_waves(batch, heads, seq_kv, want):
    n = D.mla_decode_splits(batch, heads, seq_kv, min(64, heads), 64, 132)
    _no_empty_split(n, seq_kv)
    assert n == want


def _no_empty_split(n, seq_kv):
    blocks = -(-seq_kv // 64)
    per = -(-blocks // n)
    assert (n - 1) * per < blocks, "no empty split"

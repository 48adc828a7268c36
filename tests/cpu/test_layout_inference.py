"""Layout-inference shapes TileLang's example corpus relies on (issue 10, item 3), on every target
(see conftest.py): each program is a minimal reproduction of a corpus pattern the CUDA target used
to refuse, checked against torch on the CPU and compiled for sm_90a without a GPU (the ``cuda``
param runs it on a GPU; these are unverified there until the GPU tier runs them).

- a row vector reduced from a [S, N] tile meets the default layout of an [N] vector
  (flash_decoding's combine kernel: `lse_max_local`), and a fragment indexed with a serial loop
  variable inside a T.Parallel loop (`lse_local[k, j]`): uniform indices;
- a fragment read with a uniform index outside any T.Parallel loop (`if block_mask[k] != 0:`,
  blocksparse attention): replicated in every thread;
- a one-element fragment read as `m[0]` inside a T.Parallel loop (indexer_topk_reducesum).
"""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


@tilelang.jit(out_idx=[2])
def split_combine(heads, num_split, dim):
    """flash_decoding's combine: out[h] = sum_k part[h, k] * 2^(lse[h, k] - logsumexp2_k lse[h, :])."""
    @T.prim_func
    def main(glse: T.Tensor([heads, num_split], "float16"), part: T.Tensor([heads, num_split, dim], "float16"),
             out: T.Tensor([heads, dim], "float16")):
        with T.Kernel(heads, threads=128) as by:
            po_local = T.alloc_fragment([dim], "float16")
            o_accum_local = T.alloc_fragment([dim], "float32")
            lse_local = T.alloc_fragment([num_split, 128], "float16")
            lse_logsum_local = T.alloc_fragment([128], "float32")
            lse_max_local = T.alloc_fragment([128], "float32")
            scale_local = T.alloc_fragment([128], "float32")
            T.clear(lse_logsum_local)
            T.clear(o_accum_local)
            for k, j in T.Parallel(num_split, 128):
                lse_local[k, j] = glse[by, k]
            T.reduce_max(lse_local, lse_max_local, dim=0, clear=True)
            for k in T.serial(num_split):
                for j in T.Parallel(128):
                    lse_logsum_local[j] += T.exp2(lse_local[k, j] - lse_max_local[j])
            for j in T.Parallel(128):
                lse_logsum_local[j] = T.log2(lse_logsum_local[j]) + lse_max_local[j]
            for k in T.serial(num_split):
                for i in T.Parallel(dim):
                    po_local[i] = part[by, k, i]
                for j in T.Parallel(128):
                    scale_local[j] = T.exp2(lse_local[k, j] - lse_logsum_local[j])
                for i in T.Parallel(dim):
                    o_accum_local[i] += po_local[i] * scale_local[i]
            for i in T.Parallel(dim):
                out[by, i] = o_accum_local[i]
    return main


def test_split_combine_row_vector_meets_default_layout(build, device):
    heads, num_split, dim = 4, 8, 128
    glse = (torch.randn(heads, num_split, device=device) * 3).half()
    part = torch.randn(heads, num_split, dim, device=device).half()
    out = build(split_combine, heads, num_split, dim)(glse, part)
    lse = glse.float()
    total = torch.logsumexp(lse * torch.log(torch.tensor(2.0)), dim=1, keepdim=True) / torch.log(torch.tensor(2.0))
    ref = (part.float() * torch.exp2(lse - total)[..., None]).sum(1)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)


@tilelang.jit(out_idx=[2])
def masked_block_sum(M, N, nblocks, block_N):
    """out[b, :] = sum of the column blocks of x[b] whose mask bit is set (a serial loop that
    tests a fragment with a uniform index, as block-sparse attention does)."""
    @T.prim_func
    def main(x: T.Tensor([M, N], "float32"), mask: T.Tensor([M // 32, nblocks], "int8"),
             out: T.Tensor([M, block_N], "float32")):
        with T.Kernel(M // 32, threads=128) as bx:
            block_mask = T.alloc_fragment([nblocks], "int8")
            acc = T.alloc_fragment([32, block_N], "float32")
            T.copy(mask[bx, :], block_mask)
            T.clear(acc)
            for k in T.serial(nblocks):
                if block_mask[k] != 0:
                    for i, j in T.Parallel(32, block_N):
                        acc[i, j] += x[bx * 32 + i, k * block_N + j]
            T.copy(acc, out[bx * 32, 0])
    return main


def test_fragment_tested_with_uniform_index_outside_parallel(build, device):
    M, nblocks, block_N = 64, 6, 16
    x = torch.randn(M, nblocks * block_N, device=device)
    mask = (torch.rand(M // 32, nblocks, device=device) < 0.5).to(torch.int8)
    mask[:, 0] = 1
    out = build(masked_block_sum, M, nblocks * block_N, nblocks, block_N)(x, mask)
    keep = mask.repeat_interleave(32, 0).float()                         # [M, nblocks]
    ref = (x.view(M, nblocks, block_N) * keep[..., None]).sum(1)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@tilelang.jit(out_idx=[1])
def scale_rows_in_shared(M, N, threads):
    """A T.Parallel nest over a shared tile whose only fragments are row vectors (decode kernels'
    `S_shared[h, k] = exp2(S_shared[h, k] - m[h]) / l[h]`): the nest runs over the row vectors'
    layout extended over the columns."""
    @T.prim_func
    def main(x: T.Tensor([M, N], "float32"), out: T.Tensor([M, N], "float32")):
        with T.Kernel(1, threads=threads) as bx:
            s = T.alloc_shared([M, N], "float32")
            acc = T.alloc_fragment([M, N], "float32")
            m = T.alloc_fragment([M], "float32")
            total = T.alloc_fragment([M], "float32")
            T.copy(x, acc)
            T.reduce_max(acc, m, dim=1)
            T.reduce_sum(acc, total, dim=1)
            T.copy(x, s)
            for h, k in T.Parallel(M, N):
                s[h, k] = T.exp2(s[h, k] - m[h]) / total[h]
            T.copy(s, out)
    return main


def test_parallel_nest_anchored_by_row_vectors_only(build, device):
    M, N = 16, 64
    x = torch.randn(M, N, device=device)
    out = build(scale_rows_in_shared, M, N, 128)(x)
    ref = torch.exp2(x - x.max(1, keepdim=True).values) / x.sum(1, keepdim=True)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


@tilelang.jit(out_idx=[1, 2])
def row_vector_then_tile(M, N):
    """The fuzzer's fz_21_148 shape: a nest that writes a fresh [M, N] fragment from a row vector
    reduced from a bfloat16-filled tile (the default layout of the fresh fragment would not
    match the row vector's), then a row sum of it."""
    @T.prim_func
    def main(x: T.Tensor([M, N], "bfloat16"), y: T.Tensor([M, N], "float32"), s: T.Tensor([M], "float32")):
        with T.Kernel(1, threads=256) as bx:
            a = T.alloc_fragment([M, N], "float32")
            r = T.alloc_fragment([M], "float32")
            e = T.alloc_fragment([M, N], "float32")
            total = T.alloc_fragment([M], "float32")
            T.copy(x, a)
            T.reduce_absmax(a, r, dim=1)
            for i, j in T.Parallel(M, N):
                e[i, j] = r[i] * j - x[i, j]
            T.reduce_sum(e, total, dim=1)
            T.copy(e, y)
            T.copy(total, s)
    return main


def test_fresh_tile_written_from_a_row_vector(build, device):
    M, N = 32, 32
    x = torch.randn(M, N, device=device).bfloat16()
    y, s = build(row_vector_then_tile, M, N)(x)
    xf = x.float()
    ref = xf.abs().max(1, keepdim=True).values * torch.arange(N, device=device).float() - xf
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s, ref.sum(1), rtol=1e-4, atol=1e-4)


@tilelang.jit(out_idx=[1])
def softmax_with_scalar_max(N, threads):
    """indexer_topk_reducesum's shape: a one-element fragment reduced from a vector and read as
    `mx[0]` in a T.Parallel loop over the vector."""
    @T.prim_func
    def main(x: T.Tensor([4, N], "float32"), out: T.Tensor([4, N], "float32")):
        with T.Kernel(4, threads=threads) as bx:
            v = T.alloc_fragment([N], "float32")
            mx = T.alloc_fragment([1], "float32")
            total = T.alloc_fragment([1], "float32")
            T.copy(x[bx, :], v)
            T.reduce_max(v, mx, dim=-1)
            for i in T.Parallel(N):
                v[i] = T.exp(v[i] - mx[0])
            T.reduce_sum(v, total)
            for i in T.Parallel(N):
                v[i] = v[i] / total[0]
            T.copy(v, out[bx, :])
    return main


def test_one_element_fragment_read_with_constant_index(build, device):
    x = torch.randn(4, 256, device=device) * 4
    out = build(softmax_with_scalar_max, 256, 128)(x)
    torch.testing.assert_close(out, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


@tilelang.jit(out_idx=[2, 3])
def fragment_operands_from_shared(S, H, D):
    """indexer_bwd's shape: a float16 fragment filled from a float32 shared tile is the A operand
    of one gemm transposed (dq = dlogits^T @ k) and of another plain (dk = dlogits @ q)."""
    @T.prim_func
    def main(g: T.Tensor([S, H], "float32"), kq: T.Tensor([S, D], "float16"),
             dq: T.Tensor([H, D], "float32"), dk: T.Tensor([S, D], "float32")):
        with T.Kernel(1, threads=128) as bx:
            g_shared = T.alloc_shared([S, H], "float32")
            k_shared = T.alloc_shared([S, D], "float16")
            q_shared = T.alloc_shared([H, D], "float16")
            g1 = T.alloc_fragment([S, H], "float16")
            g2 = T.alloc_fragment([S, H], "float16")
            dq_frag = T.alloc_fragment([H, D], "float32")
            dk_frag = T.alloc_fragment([S, D], "float32")
            T.copy(g, g_shared)
            T.copy(kq, k_shared)
            T.copy(kq[0:H, :], q_shared)
            T.clear(dq_frag)
            T.copy(g_shared, g1)
            T.gemm(g1, k_shared, dq_frag, transpose_A=True)
            T.copy(g_shared, g2)
            T.gemm(g2, q_shared, dk_frag, clear_accum=True)
            T.copy(dq_frag, dq)
            T.copy(dk_frag, dk)
    return main


def test_fragment_gemm_operands_in_other_layouts(build, device):
    S, H, D = 64, 64, 32
    g = torch.randn(S, H, device=device)
    kq = torch.randn(S, D, device=device).half()
    dq, dk = build(fragment_operands_from_shared, S, H, D)(g, kq)
    gh = g.half().float()
    torch.testing.assert_close(dq, gh.t() @ kq.float(), rtol=2e-3, atol=2e-2)
    torch.testing.assert_close(dk, gh @ kq[:H].float(), rtol=2e-3, atol=2e-2)


@tilelang.jit(out_idx=[2])
def query_in_registers(H, D, N, blocks):
    """MLA decoding's shape: a query fragment loaded once from global memory is the A operand of
    a FullRow gemm in a loop (nothing else lays it out: it takes the tensor-core A layout)."""
    @T.prim_func
    def main(q: T.Tensor([H, D], "float16"), kv: T.Tensor([blocks * N, D], "float16"),
             s: T.Tensor([H, N], "float32")):
        with T.Kernel(1, threads=128) as bx:
            q_local = T.alloc_fragment([H, D], "float16")
            kv_shared = T.alloc_shared([N, D], "float16")
            acc = T.alloc_fragment([H, N], "float32")
            T.copy(q, q_local)
            T.clear(acc)
            for k in T.Pipelined(blocks, num_stages=2):
                T.copy(kv[k * N, 0], kv_shared)
                T.gemm(q_local, kv_shared, acc, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, s)
    return main


def test_query_fragment_read_from_registers_by_the_gemm(build, device):
    H, D, N, blocks = 64, 64, 32, 3
    q = torch.randn(H, D, device=device).half()
    kv = torch.randn(blocks * N, D, device=device).half()
    s = build(query_in_registers, H, D, N, blocks)(q, kv)
    ref = sum(q.float() @ kv[i * N:(i + 1) * N].float().t() for i in range(blocks))
    torch.testing.assert_close(s, ref, rtol=2e-3, atol=2e-2)


@pytest.mark.cuda_compile
def test_query_fragment_takes_the_tensor_core_a_layout():
    """The generated sm_90a code reads the query from registers (tc::gemm_rs), not via shared."""
    k = tilelang.compile(query_in_registers.fn(64, 64, 32, 3), out_idx=[2], target={"kind": "cuda", "arch": "sm_90a"})
    src = k.get_kernel_source()
    assert "tc::gemm_rs<" in src and "q_local_smem" not in src


@tilelang.jit(out_idx=[2])
def combine_with_slices(num_split, block_M, dim, valid):
    """example_mha_inference's combine: `T.copy(lse_local[k, :], lse_local_split)` (a slice of a
    fragment with a uniform index into another fragment) and, as the decode kernels store their
    valid rows, `T.copy(o_accum[:valid, :], o_shared)` (a part of a fragment to shared memory)."""
    @T.prim_func
    def main(glse: T.Tensor([num_split, block_M], "float32"), part: T.Tensor([num_split, block_M, dim], "float32"),
             out: T.Tensor([valid, dim], "float32")):
        with T.Kernel(1, threads=128) as bx:
            lse_local = T.alloc_fragment([num_split, block_M], "float32")
            lse_split = T.alloc_fragment([block_M], "float32")
            lse_max = T.alloc_fragment([block_M], "float32")
            lse_sum = T.alloc_fragment([block_M], "float32")
            po_local = T.alloc_fragment([block_M, dim], "float32")
            o_accum = T.alloc_fragment([block_M, dim], "float32")
            o_shared = T.alloc_shared([valid, dim], "float32")
            T.clear(lse_sum)
            T.clear(o_accum)
            T.copy(glse, lse_local)
            T.reduce_max(lse_local, lse_max, dim=0, clear=True)
            for k in T.serial(num_split):
                T.copy(lse_local[k, :], lse_split)
                for i in T.Parallel(block_M):
                    lse_sum[i] += T.exp2(lse_split[i] - lse_max[i])
            for i in T.Parallel(block_M):
                lse_sum[i] = T.log2(lse_sum[i]) + lse_max[i]
            for k in T.serial(num_split):
                T.copy(part[k, :, :], po_local)
                for i, j in T.Parallel(block_M, dim):
                    o_accum[i, j] += po_local[i, j] * T.exp2(lse_local[k, i] - lse_sum[i])
            T.copy(o_accum[:valid, :], o_shared)
            T.copy(o_shared, out)
    return main


def test_fragment_slices_and_parts_in_copies(build, device):
    num_split, block_M, dim, valid = 4, 32, 16, 24
    glse = torch.randn(num_split, block_M, device=device) * 3
    part = torch.randn(num_split, block_M, dim, device=device)
    out = build(combine_with_slices, num_split, block_M, dim, valid)(glse, part)
    w = torch.softmax(glse * torch.log(torch.tensor(2.0)), dim=0)           # [S, M]
    ref = (part * w[..., None]).sum(0)[:valid]
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)

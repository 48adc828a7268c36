"""A row vector read by a `T.Parallel` loop laid out differently from it, where every thread
already holds the rows it visits (layout.fragment.covering_slot).

The shape of TileLang's persistent MLA decode example: the scores come from a `FullCol` gemm
(every warp holds all rows), pass through shared memory into a fragment that is the A operand of
the second gemm (so that gemm's accumulator is split along rows), and the row vector derived
from the scores rescales the second accumulator.  CPU target against torch; sm_80 and sm_90a
compile it; a loop that *writes* such a vector is still refused.  GPU run:
tests/gpu/test_covering_layouts_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError


def mla_rs(batch, heads, seqlen_kv, dim, pe_dim, block_N, block_H, threads=256):
    scale = (1.0 / (dim + pe_dim)) ** 0.5 * 1.44269504  # log2(e)
    dtype, accum_dtype = "float16", "float32"

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype), Q_pe: T.Tensor([batch, heads, pe_dim], dtype),
             KV: T.Tensor([batch, seqlen_kv, dim], dtype), K_pe: T.Tensor([batch, seqlen_kv, pe_dim], dtype),
             Output: T.Tensor([batch, heads, dim], dtype)):
        with T.Kernel(batch, heads // block_H, threads=threads) as (bx, by):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            S_shared = T.alloc_shared([block_H, block_N], dtype)
            Q_pe_shared = T.alloc_shared([block_H, pe_dim], dtype)
            KV_shared = T.alloc_shared([block_N, dim], dtype)
            K_pe_shared = T.alloc_shared([block_N, pe_dim], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_H, block_N], dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum_dtype)
            m = T.alloc_fragment([block_H], accum_dtype)
            m_prev = T.alloc_fragment([block_H], accum_dtype)
            sc = T.alloc_fragment([block_H], accum_dtype)
            ssum = T.alloc_fragment([block_H], accum_dtype)
            logsum = T.alloc_fragment([block_H], accum_dtype)
            T.copy(Q[bx, by * block_H:(by + 1) * block_H, :], Q_shared)
            T.copy(Q_pe[bx, by * block_H:(by + 1) * block_H, :], Q_pe_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum_dtype))
            for k in T.Pipelined(T.ceildiv(seqlen_kv, block_N), num_stages=2):
                T.copy(KV[bx, k * block_N:(k + 1) * block_N, :], KV_shared)
                T.copy(K_pe[bx, k * block_N:(k + 1) * block_N, :], K_pe_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.copy(m, m_prev)
                T.fill(m, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    m[i] = T.max(m[i], m_prev[i])
                for i in T.Parallel(block_H):
                    sc[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, ssum, dim=1)
                T.copy(acc_s, S_shared)
                T.copy(S_shared, acc_s_cast)
                for i in T.Parallel(block_H):
                    logsum[i] = logsum[i] * sc[i] + ssum[i]
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= sc[i]
                T.gemm(acc_s_cast, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[bx, by * block_H:(by + 1) * block_H, :])
    return main


def check(kernel, batch, heads, seqlen_kv, dim, pe_dim, device):
    q = torch.randn(batch, heads, dim).half()
    q_pe = torch.randn(batch, heads, pe_dim).half()
    kv = torch.randn(batch, seqlen_kv, dim).half()
    k_pe = torch.randn(batch, seqlen_kv, pe_dim).half()
    out = kernel(*(t.to(device) for t in (q, q_pe, kv, k_pe))).cpu().float()
    s = (q.float() @ kv.float().transpose(1, 2) + q_pe.float() @ k_pe.float().transpose(1, 2)) / (dim + pe_dim) ** 0.5
    ref = torch.softmax(s, dim=-1) @ kv.float()
    assert out.abs().max() > 0
    torch.testing.assert_close(out, ref, atol=2e-2, rtol=2e-2)


def test_mla_rs_shape_on_cpu_matches_torch():
    k = tilelang.compile(mla_rs(2, 32, 96, 64, 16, 32, 16, threads=128), out_idx=[-1], target="cpu")
    check(k, 2, 32, 96, 64, 16, "cpu")


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_row_vector_read_through_a_covering_layout_compiles(arch):
    k = tilelang.compile(mla_rs(1, 64, 256, 128, 64, 64, 64), out_idx=[-1], target={"kind": "cuda", "arch": arch},
                         pass_configs={"tc.remapped_fragment_reads": True})
    assert "acc_o" in k.get_kernel_source()


def test_covering_slot_holds_only_when_every_thread_has_its_rows():
    """Pure layout check (no compiler): the FullCol row vector (every warp holds all 64 rows)
    covers a loop whose warps split the rows; the converse does not (a warp would need rows it
    does not hold), and is refused with the error above."""
    from tilecraft.ir.layout.fragment import covering_slot, mma_accumulator_layout
    full_col = mma_accumulator_layout((64, 64), 256, 1, 8).project([0])
    split = mma_accumulator_layout((64, 512), 256, 4, 2).project([0])
    offset, coefs = covering_slot(full_col, split)
    for tid in range(256):
        lr, wm = tid // 4 % 8, tid // 32 % 4
        for h in range(2):
            row = lr + 8 * h + 16 * wm
            slot = offset + sum({"h": h, "wm": wm, "lr": lr}.get(n, 0) * c for n, c in coefs)
            held = dict(zip(("lr", "h", "mi"), (lr, slot % 2, slot // 2)))
            assert held["lr"] + 8 * held["h"] + 16 * held["mi"] == row
    assert covering_slot(split, full_col) is None


@pytest.mark.cuda_compile
def test_row_vector_written_under_another_layout_is_still_refused():
    """A loop that *writes* the row vector through a loop laid out another way would leave the
    other replicas stale: refused, not guessed."""
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 128), "float32")):
        with T.Kernel(1, threads=256) as bx:
            a_s = T.alloc_shared((64, 64), "float16")
            b_s = T.alloc_shared((64, 64), "float16")
            b2 = T.alloc_shared((64, 128), "float16")
            s = T.alloc_fragment((64, 64), "float32")
            p = T.alloc_fragment((64, 64), "float16")
            o = T.alloc_fragment((64, 128), "float32")
            mx = T.alloc_fragment((64,), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(C, b2)
            T.gemm(a_s, b_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            T.reduce_max(s, mx, dim=1)
            T.copy(s, a_s)
            T.copy(a_s, p)
            T.clear(o)
            T.gemm(p, b2, o, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(64, 128):
                mx[i] = o[i, j]
            T.copy(o, C)
    with pytest.raises(TilecraftError, match="fragment mx is indexed"):
        tilelang.compile(main, target={"kind": "cuda", "arch": "sm_80"})


def test_the_remapped_reads_are_on_by_default_and_can_be_turned_off():
    # on by default (the wrong answers of session 6 came from barriers missing inside an `if` and from
    # an `if tx < 32:` around tile work, tests/cuda/test_uniform_if_sync.py and
    # test_partial_thread_branch.py); turned off, the read is refused with a hint naming the switch
    assert "acc_o" in tilelang.compile(mla_rs(1, 64, 256, 128, 64, 64, 64), out_idx=[-1],
                                       target={"kind": "cuda", "arch": "sm_80"}).get_kernel_source()
    with pytest.raises(tilelang.TilecraftError, match="tc.remapped_fragment_reads"):
        tilelang.compile(mla_rs(1, 64, 256, 128, 64, 64, 64), out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"},
                         pass_configs={"tc.remapped_fragment_reads": False})

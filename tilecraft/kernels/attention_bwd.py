"""FlashAttention backward (FlashAttention-2's algorithm), full or causal, layout (batch, seq, heads, dim).

Four kernels, the way a training step runs them:

1. `flash_attention_fwd_lse` -- the forward of `attention.flash_attention` that also writes each query
   row's log-sum-exp LSE[b, h, s] (natural log; the backward recomputes P = exp(QK^T * scale - LSE)).
2. `flash_attention_bwd_preprocess` -- Delta[b, h, s] = rowsum(dO * O).
3. `flash_attention_bwd` -- one block per (key block, head, batch): recomputes P^T and dP^T for every
   query block the keys see, accumulates dK and dV in registers and adds its share of dQ into an fp32
   dQ accumulator (the blocks of one head all touch every dQ row).  The accumulator is head-major,
   [batch, heads, seq, dim] (private to the backward, as in FlashAttention-2/3): a query block's dQ
   tile is then one contiguous run, added on sm_90 by one TMA bulk reduce-add instead of one per row.
4. `flash_attention_bwd_postprocess` -- dQ fp32 [batch, heads, seq, dim] -> the input dtype, [batch,
   seq, heads, dim].

`flash_attention_backward(...)` chains 2-4 (and `ref_attention_backward` is torch's autograd).
"""
import math

import tilecraft as tilelang
import tilecraft.language as T

LOG2E = 1.44269504


@tilelang.jit(out_idx=[-2, -1], pass_configs={"tl.enable_fast_math": True})
def flash_attention_fwd_lse(batch: int, heads: int, seq_len: int, dim: int, is_causal: bool = False,
                            block_M: int = 64, block_N: int = 64, num_stages: int = 1, threads: int | None = None,
                            dtype: str = "float16", accum_dtype: str = "float"):
    """O and LSE (fp32, [batch, heads, seq_len], natural log) of softmax(Q K^T / sqrt(dim)) V."""
    if threads is None:
        threads = 32 * max(1, min(4, block_M // 16))
    scale = 1.0 / math.sqrt(dim) * LOG2E
    shape = [batch, seq_len, heads, dim]
    NEG = -1.0e30

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             O: T.Tensor(shape, dtype), LSE: T.Tensor([batch, heads, seq_len], accum_dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            m_prev = T.alloc_fragment([block_M], accum_dtype)
            m_cur = T.alloc_fragment([block_M], accum_dtype)
            alpha = T.alloc_fragment([block_M], accum_dtype)
            p_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m_cur, NEG)
            loop_range = (T.min(T.ceildiv((bx + 1) * block_M, block_N), T.ceildiv(seq_len, block_N))
                          if is_causal else T.ceildiv(seq_len, block_N))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0.0, NEG)
                elif seq_len % block_N:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0.0, NEG)
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
                T.copy(m_cur, m_prev)
                T.reduce_max(acc_s, m_cur, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    alpha[i] = T.exp2((m_prev[i] - m_cur[i]) * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_cur[i] * scale)
                T.reduce_sum(acc_s, p_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * alpha[i] + p_sum[i]
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] = acc_o[i, j] * alpha[i]
                T.copy(acc_s, acc_s_cast)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] = acc_o[i, j] / logsum[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
            for i in T.Parallel(block_M):  # m and log(l) in the natural-log units the backward reads
                logsum[i] = m_cur[i] * (scale / LOG2E) + T.log(logsum[i])
            T.copy(logsum, LSE[bz, by, bx * block_M:(bx + 1) * block_M])
    return main


@tilelang.jit(out_idx=[-1])
def flash_attention_bwd_preprocess(batch: int, heads: int, seq_len: int, dim: int, block_M: int = 32,
                                   threads: int = 128, dtype: str = "float16", accum_dtype: str = "float"):
    """Delta[b, h, s] = sum_d dO[b, s, h, d] * O[b, s, h, d] (fp32)."""
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def main(O: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype),
             Delta: T.Tensor([batch, heads, seq_len], accum_dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            o = T.alloc_fragment([block_M, dim], dtype)
            do = T.alloc_fragment([block_M, dim], dtype)
            prod = T.alloc_fragment([block_M, dim], accum_dtype)
            delta = T.alloc_fragment([block_M], accum_dtype)
            T.copy(O[bz, bx * block_M:(bx + 1) * block_M, by, :], o)
            T.copy(dO[bz, bx * block_M:(bx + 1) * block_M, by, :], do)
            for i, j in T.Parallel(block_M, dim):
                prod[i, j] = T.cast(o[i, j], accum_dtype) * T.cast(do[i, j], accum_dtype)
            T.reduce_sum(prod, delta, dim=1)
            T.copy(delta, Delta[bz, by, bx * block_M:(bx + 1) * block_M])
    return main


@tilelang.jit(pass_configs={"tl.enable_fast_math": True})  # no out_idx: dQ (fp32, zeroed) is accumulated into
def flash_attention_bwd(batch: int, heads: int, seq_len: int, dim: int, is_causal: bool = False,
                        block_M: int = 64, block_N: int = 64, num_stages: int = 2, threads: int = 128,
                        dtype: str = "float16", accum_dtype: str = "float"):
    """dK, dV (written) and dQ (fp32, added atomically) for one key block of block_M rows per block,
    walking the query blocks (block_N rows) that attend to it.  The default 64x64 tile with one warpgroup
    puts all five gemms on wgmma on sm_90a (D64: 193 registers; D128: 253, no spill).  Fastest on the
    H200 (session 18): 128x128/2 with 256 threads for D64, 128x64/2/256 for D128 (128x128 does not fit
    shared memory with two stages); every gemm on wgmma in both (the 64-row dQ gemm splits N over the two
    warpgroups).  What remains is dQ's staging and adds (benchmarks/results/2026-12-03_h200_s18_attention_bwd.md)."""
    sm_scale = 1.0 / math.sqrt(dim)
    scale = sm_scale * LOG2E
    shape = [batch, seq_len, heads, dim]
    stats = [batch, heads, seq_len]
    ragged = seq_len % block_M != 0 or seq_len % block_N != 0

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             dO: T.Tensor(shape, dtype), LSE: T.Tensor(stats, accum_dtype), Delta: T.Tensor(stats, accum_dtype),
             dQ: T.Tensor([batch, heads, seq_len, dim], accum_dtype), dK: T.Tensor(shape, dtype),
             dV: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            K_shared = T.alloc_shared([block_M, dim], dtype)
            V_shared = T.alloc_shared([block_M, dim], dtype)
            q = T.alloc_shared([block_N, dim], dtype)
            do = T.alloc_shared([block_N, dim], dtype)
            lse_shared = T.alloc_shared([block_N], accum_dtype)
            delta_shared = T.alloc_shared([block_N], accum_dtype)
            dsT_shared = T.alloc_shared([block_M, block_N], dtype)
            dq_shared = T.alloc_shared([block_N, dim], accum_dtype)
            qkT = T.alloc_fragment([block_M, block_N], accum_dtype)
            dsT = T.alloc_fragment([block_M, block_N], accum_dtype)
            qkT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dsT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dq = T.alloc_fragment([block_N, dim], accum_dtype)
            dv = T.alloc_fragment([block_M, dim], accum_dtype)
            dk = T.alloc_fragment([block_M, dim], accum_dtype)

            T.copy(K[bz, bx * block_M:(bx + 1) * block_M, by, :], K_shared)
            T.copy(V[bz, bx * block_M:(bx + 1) * block_M, by, :], V_shared)
            T.clear(dv)
            T.clear(dk)
            # causal: query block j sees this key block only if its last row reaches the first key
            loop_st = T.floordiv(bx * block_M, block_N) if is_causal else 0
            loop_ed = T.ceildiv(seq_len, block_N)
            for k in T.Pipelined(loop_st, loop_ed, num_stages=num_stages):
                T.copy(Q[bz, k * block_N:(k + 1) * block_N, by, :], q)
                T.copy(dO[bz, k * block_N:(k + 1) * block_N, by, :], do)
                T.copy(LSE[bz, by, k * block_N:(k + 1) * block_N], lse_shared)
                T.copy(Delta[bz, by, k * block_N:(k + 1) * block_N], delta_shared)
                # S^T and dP^T side by side: independent, so on sm_90a both wgmma groups are issued before
                # the first is waited for, and P^T is computed while dP^T runs (overlap_independent_gemms)
                T.gemm(K_shared, q, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow, clear_accum=True)
                T.gemm(V_shared, do, dsT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow,  # dP^T = V dO^T
                       clear_accum=True)
                # P^T[i, j] = exp(S[j, i] - LSE[j]); masked (causal, or rows past the end) to 0
                for i, j in T.Parallel(block_M, block_N):
                    qkT[i, j] = T.exp2(qkT[i, j] * scale - lse_shared[j] * LOG2E)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        qkT[i, j] = T.if_then_else(k * block_N + j >= bx * block_M + i, qkT[i, j], 0)
                if ragged:
                    for i, j in T.Parallel(block_M, block_N):
                        qkT[i, j] = T.if_then_else((k * block_N + j < seq_len) & (bx * block_M + i < seq_len),
                                                   qkT[i, j], 0)
                T.copy(qkT, qkT_cast)
                T.gemm(qkT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow)                   # dV += P^T dO
                for i, j in T.Parallel(block_M, block_N):                                     # dS^T
                    dsT_cast[i, j] = qkT[i, j] * (dsT[i, j] - delta_shared[j]) * sm_scale
                T.gemm(dsT_cast, q, dk, policy=T.GemmWarpPolicy.FullRow)                    # dK += dS^T Q
                T.copy(dsT_cast, dsT_shared)
                T.clear(dq)
                T.gemm(dsT_shared, K_shared, dq, transpose_A=True)                           # dQ_k = dS K
                # added from shared memory: on sm_90 one TMA bulk reduce-add for the whole (contiguous)
                # tile (cuda_ops/misc.py) instead of one atomic per element and thread
                T.copy(dq, dq_shared)
                T.atomic_add(dQ[bz, by, k * block_N:(k + 1) * block_N, :], dq_shared)
            T.copy(dv, dV[bz, bx * block_M:(bx + 1) * block_M, by, :])
            T.copy(dk, dK[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return main


@tilelang.jit(out_idx=[-1])
def flash_attention_bwd_postprocess(batch: int, heads: int, seq_len: int, dim: int, block_M: int = 64,
                                    threads: int = 128, dtype: str = "float16", accum_dtype: str = "float"):
    """dQ (the fp32 accumulator, [batch, heads, seq, dim]) -> dQ in the input dtype, [batch, seq, heads, dim]."""
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def main(dQ: T.Tensor([batch, heads, seq_len, dim], accum_dtype), dQ_out: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            acc = T.alloc_fragment([block_M, dim], accum_dtype)
            T.copy(dQ[bz, by, bx * block_M:(bx + 1) * block_M, :], acc)
            T.copy(acc, dQ_out[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return main


def flash_attention_backward(q, k, v, o, do, lse, is_causal=False, dtype="float16", **bwd_config):
    """(dQ, dK, dV) of attention(q, k, v) given its output o, the output's gradient do and the forward's
    LSE ([batch, heads, seq], natural log): the preprocess, the backward and the dQ cast, in order."""
    import torch
    batch, seq_len, heads, dim = q.shape
    delta = flash_attention_bwd_preprocess(batch, heads, seq_len, dim, dtype=dtype)(o, do)
    dq_acc = torch.zeros(batch, heads, seq_len, dim, dtype=torch.float32, device=q.device)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    flash_attention_bwd(batch, heads, seq_len, dim, is_causal, dtype=dtype, **bwd_config)(
        q, k, v, do, lse, delta, dq_acc, dk, dv)
    dq = flash_attention_bwd_postprocess(batch, heads, seq_len, dim, dtype=dtype)(dq_acc)
    return dq, dk, dv


def ref_attention_lse(q, k, v, is_causal=False):
    """LSE [batch, heads, seq] (fp32, natural log) of the scaled scores, computed in fp32."""
    import torch
    qt, kt = (t.transpose(1, 2).float() for t in (q, k))
    s = qt @ kt.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.logsumexp(s, dim=-1)


def ref_attention_backward(q, k, v, do, is_causal=False):
    """(dQ, dK, dV) from torch autograd through SDPA in fp32 (layout (batch, seq, heads, dim))."""
    import torch
    import torch.nn.functional as F
    qt, kt, vt = (t.detach().transpose(1, 2).float().requires_grad_(True) for t in (q, k, v))
    o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=is_causal)
    o.backward(do.transpose(1, 2).float())
    return tuple(t.grad.transpose(1, 2).contiguous() for t in (qt, kt, vt))

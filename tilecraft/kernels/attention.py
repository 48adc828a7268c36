"""FlashAttention forward (online softmax), full or causal, layout (batch, seq, heads, dim)."""
import math

import tilecraft as tilelang
import tilecraft.language as T


# fast math: exp2 becomes one ex2.approx (FlashAttention builds with --use_fast_math too); on the H200 it took
# D64 S1024 from 0.95x to 1.05x SDPA and D128 causal from 0.88x to 0.93x (2026-11-30)
@tilelang.jit(out_idx=[-1], pass_configs={"tl.enable_fast_math": True})
def flash_attention(batch: int, heads: int, seq_len: int, dim: int, is_causal: bool = False,
                    block_M: int = 64, block_N: int = 64, num_stages: int = 1, threads: int | None = None,
                    dtype: str = "float16", accum_dtype: str = "float", heavy_first: bool | None = None):
    """heavy_first (default: causal): block x takes query block nq-1-x, so within each (batch, head) the
    longest causal rows start first and the grid's last blocks, the tail, are the short ones."""
    if heavy_first is None:
        heavy_first = is_causal
    if threads is None:  # warps split the rows 16 at a time (P is reused from registers): <= block_M/16 warps
        threads = 32 * max(1, min(4, block_M // 16))
    scale = 1.0 / math.sqrt(dim) * 1.44269504  # fold log2(e) so the kernel can use exp2
    shape = [batch, seq_len, heads, dim]
    NEG = -1.0e30

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            if heavy_first:
                bx = T.ceildiv(seq_len, block_M) - 1 - bx
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
                # the mask costs a compare and select per score: only blocks that cross the
                # diagonal (causal) or the end of the sequence (ragged) need it
                if is_causal:
                    if (k + 1) * block_N > bx * block_M:
                        for i, j in T.Parallel(block_M, block_N):
                            acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0.0, NEG)
                    else:
                        T.clear(acc_s)
                elif seq_len % block_N:  # only the last key block runs past the end
                    if (k + 1) * block_N > seq_len:
                        for i, j in T.Parallel(block_M, block_N):
                            acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0.0, NEG)
                    else:
                        T.clear(acc_s)
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
    return main


def ref_attention(q, k, v, is_causal=False):
    import torch.nn.functional as F
    qt, kt, vt = (t.transpose(1, 2).float() for t in (q, k, v))
    o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=is_causal)
    return o.transpose(1, 2).contiguous().to(q.dtype)

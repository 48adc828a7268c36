"""FlashAttention forward (online softmax), full and causal, checked against torch SDPA.

Layout (batch, seq_len, heads, dim), as in the tutorials.
    python examples/flash_attention.py
"""
import math

import torch
import torch.nn.functional as F

import tilecraft as tilelang
import tilecraft.language as T

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@tilelang.jit(out_idx=[-1])
def flash_attn(batch, heads, seq_len, dim, is_causal=False, block_M=64, block_N=64,
               num_stages=1, threads=128, dtype="float16", accum_dtype="float"):
    scale = 1.0 / math.sqrt(dim)
    shape = [batch, seq_len, heads, dim]
    NEG = -1.0e30

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             O: T.Tensor(shape, dtype)):
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
                for i, j in T.Parallel(block_M, block_N):
                    if is_causal:
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0.0, NEG)
                    else:
                        acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0.0, NEG)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
                T.copy(m_cur, m_prev)
                T.reduce_max(acc_s, m_cur, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    alpha[i] = T.exp((m_prev[i] - m_cur[i]) * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp((acc_s[i, j] - m_cur[i]) * scale)
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


def reference(q, k, v, causal):
    qt, kt, vt = (t.transpose(1, 2).float() for t in (q, k, v))
    o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    return o.transpose(1, 2).contiguous().to(q.dtype)


def main():
    B, H, S, D = 1, 2, 200, 64
    q, k, v = (torch.randn(B, S, H, D, device=DEVICE, dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        attn = flash_attn(B, H, S, D, is_causal=causal)
        o = attn(q, k, v)
        ref = reference(q, k, v, causal)
        rel = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
        assert rel < 1e-2, f"relative error {rel:.3e}"
        torch.testing.assert_close(o, ref, rtol=2e-2, atol=2e-2)
        print(f"flash_attention {'causal' if causal else 'full  '} B={B} H={H} S={S} D={D}: OK (rel_err={rel:.2e})")


if __name__ == "__main__":
    main()

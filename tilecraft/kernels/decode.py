"""Decode attention: one new query token per sequence against a long KV cache, split over the KV length
(flash-decoding) so that a small batch still fills the GPU, then a combine kernel.

- `gqa_decode_split`: Q [batch, heads, dim]; K, V [batch, seq_kv, kv_heads, dim] (or paged: K, V
  [pages, page_size, kv_heads, dim] with Block_table [batch, max_pages] int32); Seqlens [batch] int32,
  each sequence's length (<= seq_kv).  Grid (kv_heads, splits, batch): one block serves the `heads //
  kv_heads` query heads of one KV head (GQA: the KV tile is read once for the whole group) over one
  slice of the KV length, and writes that slice's normalized partial output and its log-sum-exp.
- `mla_decode_split`: DeepSeek's multi-head latent attention decode: per token one shared latent KV row
  (512, also the value) and one rope key (64); scores Q_nope . KV + Q_pe . K_pe, scaled by
  1/sqrt(512 + 64).  KV in bf16, or in fp8 e4m3 with a per-tensor scale (folded into the scores and
  the output: Q . (s KV) = s (Q . KV)).
- `decode_combine`: O[b, h] = sum over splits of exp(lse_s - lse) O_s (both layouts share it).
"""
import math

import tilecraft as tilelang
import tilecraft.language as T

LOG2E = 1.44269504
NEG = -1.0e30


def _split_len(seq_kv: int, splits: int, block_N: int) -> int:
    """KV positions per split, a whole number of blocks."""
    return -(-seq_kv // (splits * block_N)) * block_N


@tilelang.jit(out_idx=[-2, -1], pass_configs={"tl.enable_fast_math": True})
def gqa_decode_split(batch: int, heads: int, kv_heads: int, seq_kv: int, dim: int, num_split: int = 4,
                     block_N: int = 64, block_H: int = 16, num_stages: int = 1, threads: int = 128,
                     page_size: int = 0, num_pages: int = 0, dtype: str = "float16",
                     accum_dtype: str = "float"):
    """page_size > 0: the paged layout (page_size a multiple of block_N; Block_table maps a sequence's
    logical page to a physical one).  Outputs O_partial [batch, heads, num_split, dim] (fp32) and
    LSE_partial [batch, heads, num_split] (fp32, log2 units).  num_stages 1: its KV loads synchronous, ~4 blocks
    an SM hiding each other's latency; two stages (cp.async) measured slower on the H200 (session 19: B1 H32/8
    KV64K 0.75x SDPA against 0.90x; B16 / B64 0.92x / 0.96x against 0.95x / 0.94x)."""
    group = heads // kv_heads
    if heads % kv_heads:
        raise ValueError(f"gqa_decode_split: heads={heads} is not a multiple of kv_heads={kv_heads}")
    if group > block_H:
        raise ValueError(f"gqa_decode_split: {group} query heads per KV head exceed block_H={block_H}")
    paged = page_size > 0
    if paged and page_size % block_N:
        raise ValueError(f"gqa_decode_split: page_size={page_size} must be a multiple of block_N={block_N}")
    chunk = _split_len(seq_kv, num_split, block_N)
    scale = 1.0 / math.sqrt(dim) * LOG2E
    kv_shape = [num_pages, page_size, kv_heads, dim] if paged else [batch, seq_kv, kv_heads, dim]
    max_pages = -(-seq_kv // page_size) if paged else 1

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
             Seqlens: T.Tensor([batch], "int32"), Block_table: T.Tensor([batch, max_pages], "int32"),
             O_partial: T.Tensor([batch, heads, num_split, dim], accum_dtype),
             LSE_partial: T.Tensor([batch, heads, num_split], accum_dtype)):
        with T.Kernel(kv_heads, num_split, batch, threads=threads) as (hid, sid, bz):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_H, block_N], dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum_dtype)
            m_prev = T.alloc_fragment([block_H], accum_dtype)
            m_cur = T.alloc_fragment([block_H], accum_dtype)
            alpha = T.alloc_fragment([block_H], accum_dtype)
            p_sum = T.alloc_fragment([block_H], accum_dtype)
            logsum = T.alloc_fragment([block_H], accum_dtype)

            seqlen = Seqlens[bz]
            for i, j in T.Parallel(block_H, dim):   # the group's heads; the rows past it stay zero, unwritten
                if i < group:
                    Q_shared[i, j] = Q[bz, hid * group + i, j]
                else:
                    Q_shared[i, j] = T.cast(0, dtype)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m_cur, NEG)
            start = sid * chunk
            n_blocks = T.max(T.min(T.ceildiv(seqlen - start, block_N), chunk // block_N), 0)
            for k in T.Pipelined(n_blocks, num_stages=num_stages):
                pos = start + k * block_N
                if paged:
                    page = Block_table[bz, pos // page_size]
                    off = pos % page_size
                    T.copy(K[page, off:off + block_N, hid, :], K_shared)
                else:
                    T.copy(K[bz, pos:pos + block_N, hid, :], K_shared)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(pos + j < seqlen, 0.0, NEG)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                if paged:
                    T.copy(V[page, off:off + block_N, hid, :], V_shared)
                else:
                    T.copy(V[bz, pos:pos + block_N, hid, :], V_shared)
                T.copy(m_cur, m_prev)
                T.reduce_max(acc_s, m_cur, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    alpha[i] = T.exp2((m_prev[i] - m_cur[i]) * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_cur[i] * scale)
                T.reduce_sum(acc_s, p_sum, dim=1)
                for i in T.Parallel(block_H):
                    logsum[i] = logsum[i] * alpha[i] + p_sum[i]
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] = acc_o[i, j] * alpha[i]
                T.copy(acc_s, acc_s_cast)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            # an empty split (the sequence ends before it) has logsum 0: output 0 with weight exp2(NEG) = 0
            for i, j in T.Parallel(block_H, dim):
                if i < group:
                    O_partial[bz, hid * group + i, sid, j] = T.if_then_else(logsum[i] > 0, acc_o[i, j] / logsum[i], 0.0)
            for i in T.Parallel(block_H):
                if i < group:
                    LSE_partial[bz, hid * group + i, sid] = T.if_then_else(
                        logsum[i] > 0, T.log2(logsum[i]) + m_cur[i] * scale, NEG)
    return main


def _largest_divisor(n: int, at_most: int) -> int:
    return max(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


@tilelang.jit(out_idx=[-1])
def decode_combine(batch: int, heads: int, num_split: int, dim: int, threads: int | None = None,
                   dtype: str = "float16", accum_dtype: str = "float", block_D: int | None = None,
                   chunk: int | None = None):
    """O[b, h, :] from the splits' partial outputs and log2-sum-exps.  Each block (one warp by default)
    combines `block_D` columns of one head (grid: dim / block_D x heads x batch, so a batch-1 decode still
    fills the GPU), copying `chunk` splits' rows at a time into registers (16-byte loads) and then adding
    them (any number of splits: registers hold the block's columns and one chunk, not all the splits).
    Measured on the H200, B1 H128 MLA at 64 splits (16.8 MB of fp32 partials): one 128-thread block per head
    streaming the splits one at a time 28-31 us; 512 columns on 64 threads in chunks of 8 / 16 / 32: 24 /
    29 / 31 us; 256 or 128 columns on one warp, chunks of 16, loads inside the sum (scalar, 4-byte): 15.5
    us in the decode, 8.1 us alone; the chunk copied first (float4 loads), chunks of 4: 6.2 us alone (2.7
    TB/s; session 21, benchmarks/results/2026-12-03_h200_s21_gpu.md)."""
    block_D = block_D or (min(dim, 128) if dim % min(dim, 128) == 0 else dim)
    threads = threads or 32
    chunk = chunk or _largest_divisor(num_split, 4)
    assert dim % block_D == 0 and num_split % chunk == 0, (dim, block_D, num_split, chunk)

    @T.prim_func
    def main(O_partial: T.Tensor([batch, heads, num_split, dim], accum_dtype),
             LSE_partial: T.Tensor([batch, heads, num_split], accum_dtype), O: T.Tensor([batch, heads, dim], dtype)):
        with T.Kernel(dim // block_D, heads, batch, threads=threads) as (dx, hid, bz):
            lse = T.alloc_fragment([num_split], accum_dtype)
            lse_max = T.alloc_fragment([1], accum_dtype)
            weight = T.alloc_fragment([num_split], accum_dtype)
            weight_shared = T.alloc_shared([num_split], accum_dtype)
            w_sum = T.alloc_fragment([1], accum_dtype)
            out = T.alloc_fragment([block_D], accum_dtype)
            part = T.alloc_fragment([chunk, block_D], accum_dtype)
            T.copy(LSE_partial[bz, hid, :], lse)
            T.reduce_max(lse, lse_max, dim=0)
            for s in T.Parallel(num_split):
                weight[s] = T.exp2(lse[s] - lse_max[0])
            T.reduce_sum(weight, w_sum, dim=0)
            T.copy(weight, weight_shared)
            T.clear(out)
            for c in T.serial(num_split // chunk):
                T.copy(O_partial[bz, hid, c * chunk:(c + 1) * chunk, dx * block_D:(dx + 1) * block_D], part)
                for s in T.unroll(chunk):
                    for j in T.Parallel(block_D):
                        out[j] += part[s, j] * weight_shared[c * chunk + s]
            for j in T.Parallel(block_D):
                out[j] = out[j] / w_sum[0]
            T.copy(out, O[bz, hid, dx * block_D:(dx + 1) * block_D])
    return main


def decode_splits(blocks_per_split: int, seq_kv: int, block_N: int = 64, sms: int | None = None,
                  blocks_per_sm: int = 4, wave_fill: float = 0.0) -> int:
    """The number of KV splits that gives the GPU about `blocks_per_sm` blocks per SM (`blocks_per_split`: the
    grid's blocks for one split, e.g. kv_heads * batch), each split at least two KV blocks long, and no empty
    split (a whole number of blocks each).  `sms`: the device's SM count (the current CUDA device's, else 132).
    `wave_fill` > 0: the smallest such count (from the one above, up to twice it) whose blocks fill their last
    wave of `blocks_per_sm * sms` to at least this fraction, else the best filled (long blocks at one per SM:
    1.45 waves of work take two).
    Measured on the H200 (session 18): GQA decode wants ~4 (B1 H32/8 KV64K: 64 splits 0.90x SDPA, 16 splits
    0.52x); MLA decode ~1, its combine reading heads x 512 floats per split (B1 H128 KV32K: split kernel +
    combine 69 us at 64 splits, 86 at 32, 176 at 256); session 19: MLA B64 H16 KV8K at 3 splits (192 blocks,
    1.45 waves) 0.358 ms against 0.217 at 4 (256 blocks, 1.94 waves) -- hence `wave_fill` (`mla_decode_splits`)."""
    if sms is None:
        try:
            import torch
            sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count \
                if torch.cuda.is_available() else 132
        except Exception:  # noqa: BLE001 - no CUDA runtime: the H100/H200 count
            sms = 132
    blocks = -(-seq_kv // block_N)
    most = max(1, blocks // 2)

    def whole(n):                        # splits with no empty one, about n of them
        per = -(-blocks // n)            # KV blocks per split
        return -(-blocks // per)

    want = whole(max(1, min(-(-blocks_per_sm * sms // max(1, blocks_per_split)), most)))
    if wave_fill <= 0:
        return want
    slots = blocks_per_sm * sms

    def fill(n):
        grid = n * blocks_per_split
        return grid / (-(-grid // slots) * slots)
    tried = sorted({whole(n) for n in range(want, min(2 * want, most) + 1)})
    good = [n for n in tried if fill(n) >= wave_fill]
    return good[0] if good else max(tried, key=lambda n: (fill(n), -n))


def mla_decode_splits(batch: int, heads: int, seq_kv: int, block_H: int = 64, block_N: int = 64,
                      sms: int | None = None) -> int:
    """`decode_splits` for `mla_decode_split`: about one block per SM, the last wave at least 90 % full."""
    return decode_splits(-(-heads // block_H) * batch, seq_kv, block_N, sms, blocks_per_sm=1, wave_fill=0.9)


@tilelang.jit(out_idx=[-2, -1], pass_configs={"tl.enable_fast_math": True})
def mla_decode_split(batch: int, heads: int, seq_kv: int, dim: int = 512, pe_dim: int = 64, num_split: int = 4,
                     block_N: int = 64, block_H: int = 64, num_stages: int = 2, threads: int = 256,
                     dtype: str = "bfloat16", kv_dtype: str = "bfloat16", accum_dtype: str = "float"):
    """Q_nope [batch, heads, dim], Q_pe [batch, heads, pe_dim]; KV [batch, seq_kv, dim] (kv_dtype: bf16,
    or float8_e4m3fn scaled by KV_scale[0]), K_pe [batch, seq_kv, pe_dim] (dtype); Seqlens [batch].
    Outputs as `gqa_decode_split`'s (the value is KV itself: O has `dim` columns).  Two stages: at 64 heads a
    block the KV loads go by TMA from a producer warpgroup (H200, session 19, split kernel alone: B1 H128 KV32K
    46 -> 32 us; B64 H16 KV8K, cp.async at 16 heads a block, 206 -> 157 us); block_N=32 at 16 heads ran 35x
    slower than 64 (5.7 ms): 16x32 score tiles on 8 warps have no mma.sync split (scalar dot products; see the plan)."""
    fp8 = kv_dtype != dtype
    chunk = _split_len(seq_kv, num_split, block_N)
    sm_scale = 1.0 / math.sqrt(dim + pe_dim)

    @T.prim_func
    def main(Q_nope: T.Tensor([batch, heads, dim], dtype), Q_pe: T.Tensor([batch, heads, pe_dim], dtype),
             KV: T.Tensor([batch, seq_kv, dim], kv_dtype), K_pe: T.Tensor([batch, seq_kv, pe_dim], dtype),
             KV_scale: T.Tensor([1], "float32"), Seqlens: T.Tensor([batch], "int32"),
             O_partial: T.Tensor([batch, heads, num_split, dim], accum_dtype),
             LSE_partial: T.Tensor([batch, heads, num_split], accum_dtype)):
        with T.Kernel(T.ceildiv(heads, block_H), num_split, batch, threads=threads) as (hb, sid, bz):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            Qpe_shared = T.alloc_shared([block_H, pe_dim], dtype)
            KV_shared = T.alloc_shared([block_N, dim], dtype)
            Kpe_shared = T.alloc_shared([block_N, pe_dim], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum_dtype)
            # P goes through shared memory (as TileLang's MLA example does): with 64 heads on two warpgroups
            # every gemm takes wgmma on sm_90a, its warpgroups along N; from registers, P's gemm would need
            # the scores' accumulator split along M, which 64 rows on two warpgroups cannot be
            S_shared = T.alloc_shared([block_H, block_N], dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum_dtype)
            m_prev = T.alloc_fragment([block_H], accum_dtype)
            m_cur = T.alloc_fragment([block_H], accum_dtype)
            alpha = T.alloc_fragment([block_H], accum_dtype)
            p_sum = T.alloc_fragment([block_H], accum_dtype)
            logsum = T.alloc_fragment([block_H], accum_dtype)
            if fp8:
                KV_fp8 = T.alloc_shared([block_N, dim], kv_dtype)

            kv_scale = KV_scale[0]
            seqlen = Seqlens[bz]
            T.copy(Q_nope[bz, hb * block_H:(hb + 1) * block_H, :], Q_shared)
            T.copy(Q_pe[bz, hb * block_H:(hb + 1) * block_H, :], Qpe_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m_cur, NEG)
            start = sid * chunk
            n_blocks = T.max(T.min(T.ceildiv(seqlen - start, block_N), chunk // block_N), 0)
            for k in T.Pipelined(n_blocks, num_stages=num_stages):
                pos = start + k * block_N
                if fp8:
                    T.copy(KV[bz, pos:pos + block_N, :], KV_fp8)
                    T.copy(KV_fp8, KV_shared)
                else:
                    T.copy(KV[bz, pos:pos + block_N, :], KV_shared)
                T.copy(K_pe[bz, pos:pos + block_N, :], Kpe_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                if fp8:  # the latent scores of the scaled KV, before the (unscaled) rope part is added
                    for i, j in T.Parallel(block_H, block_N):
                        acc_s[i, j] = acc_s[i, j] * kv_scale
                T.gemm(Qpe_shared, Kpe_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(pos + j < seqlen, acc_s[i, j], NEG)
                T.copy(m_cur, m_prev)
                T.reduce_max(acc_s, m_cur, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    alpha[i] = T.exp2((m_prev[i] - m_cur[i]) * (sm_scale * LOG2E))
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2((acc_s[i, j] - m_cur[i]) * (sm_scale * LOG2E))
                T.reduce_sum(acc_s, p_sum, dim=1)
                for i in T.Parallel(block_H):
                    logsum[i] = logsum[i] * alpha[i] + p_sum[i]
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] = acc_o[i, j] * alpha[i]
                T.copy(acc_s, S_shared)
                T.gemm(S_shared, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] = T.if_then_else(logsum[i] > 0, acc_o[i, j] * kv_scale / logsum[i], 0.0)
            T.copy(acc_o, O_partial[bz, hb * block_H:(hb + 1) * block_H, sid, :])
            for i in T.Parallel(block_H):
                logsum[i] = T.if_then_else(logsum[i] > 0, T.log2(logsum[i]) + m_cur[i] * (sm_scale * LOG2E), NEG)
            T.copy(logsum, LSE_partial[bz, hb * block_H:(hb + 1) * block_H, sid])
    return main


@tilelang.jit(out_idx=[-2, -1], pass_configs={"tl.enable_fast_math": True})
def mla_decode_split_t(batch: int, heads: int, seq_kv: int, dim: int = 512, pe_dim: int = 64, num_split: int = 4,
                       block_N: int = 64, block_H: int = 16, num_stages: int = 3, dtype: str = "bfloat16",
                       kv_dtype: str = "bfloat16", accum_dtype: str = "float"):
    """`mla_decode_split` transposed, for <= 16 heads a block: one warp group computes S^T = KV Q^T
    [block_N, block_H] and O^T += KV^T P^T [dim, block_H] on wgmma (M = the 64 KV rows or the 512 latent
    columns, N = the heads), so Q is read once a tile by the warp group instead of once per warp (the row form
    splits the score columns over 4 warps, each re-reading all of Q); the softmax runs down S^T's columns.
    The pipelined loop is the compiler's (sm_90a: a producer warp group issues TMA tile loads into a ring of
    `num_stages`; one block an SM, 213 KB of shared memory at 3 stages); fp8 KV is widened by the consumer, as
    in `mla_decode_split`.  H200, session 31 (B64 H16 KV8192 fp8, 4 splits, split kernel alone, CUDA-event
    medians, two machine starts): `mla_decode_split` 159.9 / 158.4 us, this kernel 143.6 / 139.6 us at 2 stages,
    140.3 / 137.6 at 3; without the widening (wrong answers, timing only) 104.6 / 101.4 against 124.7 -- the
    widening, ~36 us on the consumer's path, is what is left between it and 80 % of the copy (bench with the
    combine: 0.1438 ms, 55 %; benchmarks/results/2026-12-05_h200_s31_mla.md)."""
    fp8 = kv_dtype != dtype
    chunk = _split_len(seq_kv, num_split, block_N)
    scale = 1.0 / math.sqrt(dim + pe_dim) * LOG2E

    @T.prim_func
    def main(Q_nope: T.Tensor([batch, heads, dim], dtype), Q_pe: T.Tensor([batch, heads, pe_dim], dtype),
             KV: T.Tensor([batch, seq_kv, dim], kv_dtype), K_pe: T.Tensor([batch, seq_kv, pe_dim], dtype),
             KV_scale: T.Tensor([1], "float32"), Seqlens: T.Tensor([batch], "int32"),
             O_partial: T.Tensor([batch, heads, num_split, dim], accum_dtype),
             LSE_partial: T.Tensor([batch, heads, num_split], accum_dtype)):
        with T.Kernel(T.ceildiv(heads, block_H), num_split, batch, threads=128) as (hb, sid, bz):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            Qpe_shared = T.alloc_shared([block_H, pe_dim], dtype)
            KV_shared = T.alloc_shared([block_N, dim], dtype)
            Kpe_shared = T.alloc_shared([block_N, pe_dim], dtype)
            P_shared = T.alloc_shared([block_N, block_H], dtype)
            acc_s = T.alloc_fragment([block_N, block_H], accum_dtype)
            acc_o = T.alloc_fragment([dim, block_H], accum_dtype)
            m_prev = T.alloc_fragment([block_H], accum_dtype)
            m_cur = T.alloc_fragment([block_H], accum_dtype)
            alpha = T.alloc_fragment([block_H], accum_dtype)
            p_sum = T.alloc_fragment([block_H], accum_dtype)
            logsum = T.alloc_fragment([block_H], accum_dtype)
            if fp8:
                KV_fp8 = T.alloc_shared([block_N, dim], kv_dtype)

            kv_scale = KV_scale[0]
            seqlen = Seqlens[bz]
            T.copy(Q_nope[bz, hb * block_H:(hb + 1) * block_H, :], Q_shared)
            T.copy(Q_pe[bz, hb * block_H:(hb + 1) * block_H, :], Qpe_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m_cur, NEG)
            start = sid * chunk
            n_blocks = T.max(T.min(T.ceildiv(seqlen - start, block_N), chunk // block_N), 0)
            for k in T.Pipelined(n_blocks, num_stages=num_stages):
                pos = start + k * block_N
                if fp8:
                    T.copy(KV[bz, pos:pos + block_N, :], KV_fp8)
                    for h in T.unroll(block_N // 32):   # 32 rows a copy: staged through registers (16 vectors)
                        T.copy(KV_fp8[h * 32:(h + 1) * 32, :], KV_shared[h * 32:(h + 1) * 32, :])
                else:
                    T.copy(KV[bz, pos:pos + block_N, :], KV_shared)
                T.copy(K_pe[bz, pos:pos + block_N, :], Kpe_shared)
                T.clear(acc_s)
                T.gemm(KV_shared, Q_shared, acc_s, transpose_B=True)
                if fp8:
                    for i, j in T.Parallel(block_N, block_H):
                        acc_s[i, j] = acc_s[i, j] * kv_scale
                T.gemm(Kpe_shared, Qpe_shared, acc_s, transpose_B=True)
                for i, j in T.Parallel(block_N, block_H):
                    acc_s[i, j] = T.if_then_else(pos + i < seqlen, acc_s[i, j], NEG)
                T.copy(m_cur, m_prev)
                T.reduce_max(acc_s, m_cur, dim=0, clear=False)
                for j in T.Parallel(block_H):
                    alpha[j] = T.exp2((m_prev[j] - m_cur[j]) * scale)
                for i, j in T.Parallel(block_N, block_H):
                    acc_s[i, j] = T.exp2((acc_s[i, j] - m_cur[j]) * scale)
                T.reduce_sum(acc_s, p_sum, dim=0)
                for j in T.Parallel(block_H):
                    logsum[j] = logsum[j] * alpha[j] + p_sum[j]
                for i, j in T.Parallel(dim, block_H):
                    acc_o[i, j] = acc_o[i, j] * alpha[j]
                T.copy(acc_s, P_shared)
                T.gemm(KV_shared, P_shared, acc_o, transpose_A=True)
            for i, j in T.Parallel(dim, block_H):
                if hb * block_H + j < heads:
                    O_partial[bz, hb * block_H + j, sid, i] = T.if_then_else(logsum[j] > 0,
                                                                             acc_o[i, j] * kv_scale / logsum[j], 0.0)
            for j in T.Parallel(block_H):
                logsum[j] = T.if_then_else(logsum[j] > 0, T.log2(logsum[j]) + m_cur[j] * scale, NEG)
            T.copy(logsum, LSE_partial[bz, hb * block_H:(hb + 1) * block_H, sid])
    return main


@tilelang.jit(out_idx=[-2, -1], pass_configs={"tl.enable_fast_math": True})
def mla_decode_split_ws(batch: int, heads: int, seq_kv: int, dim: int = 512, pe_dim: int = 64, num_split: int = 4,
                        block_N: int | None = None, block_H: int = 16, widen_from: str = "shared",
                        transposed: bool = False, widen_rows: int = 32, dtype: str = "bfloat16",
                        kv_dtype: str = "float8_e4m3fn", accum_dtype: str = "float"):
    """`mla_decode_split` for fp8 KV, warp-specialized by hand (TileLang's style: `if tx < 128` branches,
    T.alloc_barrier, T.barrier_wait / T.barrier_arrive): warp group 1, the producer, fills a ring of two
    bf16 stages (KV and K_pe tiles) and arrives on the stage's `full` mbarrier; warp group 0, the consumer
    (four warps, the scores' 32 columns over them as in `mla_decode_split`), waits for the stage, runs the
    scores, the softmax and PV, and arrives on the stage's `empty` mbarrier.  The fp8 -> bf16 widening runs
    on the producer's 128 threads, off the consumers' path.  The producer loads tile k before it waits for
    its stage (the load's latency under that wait), then widens it into the stage:
    widen_from "shared": KV's fp8 tile by cp.async into one shared staging tile (16 KB), widened shared ->
    shared; "regs": KV's fp8 tile into registers (a fragment), widened on its way to the stage.  K_pe's tile
    goes through registers either way.  ptxas fits both roles in 128 registers (256 threads: two blocks an
    SM, 111 KB of shared memory each) without T.set_max_nreg, which would launch one block an SM.
    The stage index is a constant in each of the loop's two branches (k even / odd): each stage is a tile of
    its own, which gets the gemms' swizzle.
    transposed: the consumer computes S^T = KV Q^T and O^T += KV^T P^T (64 KV rows a tile by default, each a
    wgmma with M = 64 KV rows or 512 latent columns and N = the 16 heads, one warp group): Q is read once a tile
    by the warp group instead of once per warp, the softmax runs down the columns of S^T; one block an SM
    (two 64 KB stages); the output is written transposed from O^T.
    Measured on the H200 (session 31, B64 H16 KV8192, split kernel alone): 162-164 us (rows) and 166 us
    (transposed) against `mla_decode_split`'s 158-160 and `mla_decode_split_t`'s 140: slower.  Without the
    widening's stores 135 / 111 us: the producer is the limit -- its loads complete before it goes on (a copy in
    a kernel synchronised by hand is synchronous here), so each tile waits out the memory latency; it needs
    several tiles in flight (asynchronous copies in hand-specialized branches, or the compiler's own producer
    converting: see `mla_decode_split_t`).  Kept as the tested scaffold for that.
    widen_rows: rows a converting copy widens (a 64-row tile in two copies of 32: the lowering stages a thread's
    copy through registers, all its loads before any store, up to 16 vectors, which 32 rows are)."""
    assert kv_dtype != dtype, "mla_decode_split_ws is the fp8-KV form (bf16 KV: mla_decode_split)"
    assert widen_from in ("shared", "regs"), widen_from
    block_N = block_N or (64 if transposed else 32)
    widen_rows = min(widen_rows, block_N)
    assert block_N % widen_rows == 0, (block_N, widen_rows)
    chunk = _split_len(seq_kv, num_split, block_N)
    scale = 1.0 / math.sqrt(dim + pe_dim) * LOG2E
    G = 128   # threads of a warp group

    @T.macro
    def produce(KV, K_pe, KV_fp8, kv_r, pe_r, kv_stage, pe_stage, full, empty, bz, start, k):
        """Tile k into its stage (kv_stage, pe_stage; barriers full, empty of stage k % 2)."""
        pos = start + k * block_N
        T.copy(K_pe[bz, pos:pos + block_N, :], pe_r)
        if widen_from == "shared":
            T.copy(KV[bz, pos:pos + block_N, :], KV_fp8)
        else:
            T.copy(KV[bz, pos:pos + block_N, :], kv_r)
        T.barrier_wait(empty, ((k // 2) + 1) % 2)   # the consumer is done with tile k - 2
        if widen_from == "shared" and widen_rows == block_N:
            T.copy(KV_fp8, kv_stage)
        elif widen_from == "shared":
            for h in T.unroll(block_N // widen_rows):
                T.copy(KV_fp8[h * widen_rows:(h + 1) * widen_rows, :], kv_stage[h * widen_rows:(h + 1) * widen_rows, :])
        else:
            T.copy(kv_r, kv_stage)
        T.copy(pe_r, pe_stage)
        T.barrier_arrive(full)

    @T.macro
    def consume(Q_shared, Qpe_shared, kv_stage, pe_stage, S_shared, acc_s, acc_o, m_prev, m_cur, alpha, p_sum,
                logsum, full, empty, kv_scale, seqlen, start, k):
        pos = start + k * block_N
        T.barrier_wait(full, (k // 2) % 2)
        T.clear(acc_s)
        T.gemm(Q_shared, kv_stage, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
        for i, j in T.Parallel(block_H, block_N):
            acc_s[i, j] = acc_s[i, j] * kv_scale
        T.gemm(Qpe_shared, pe_stage, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
        for i, j in T.Parallel(block_H, block_N):
            acc_s[i, j] = T.if_then_else(pos + j < seqlen, acc_s[i, j], NEG)
        T.copy(m_cur, m_prev)
        T.reduce_max(acc_s, m_cur, dim=1, clear=False)
        for i in T.Parallel(block_H):
            alpha[i] = T.exp2((m_prev[i] - m_cur[i]) * scale)
        for i, j in T.Parallel(block_H, block_N):
            acc_s[i, j] = T.exp2((acc_s[i, j] - m_cur[i]) * scale)
        T.reduce_sum(acc_s, p_sum, dim=1)
        for i in T.Parallel(block_H):
            logsum[i] = logsum[i] * alpha[i] + p_sum[i]
        for i, j in T.Parallel(block_H, dim):
            acc_o[i, j] = acc_o[i, j] * alpha[i]
        T.copy(acc_s, S_shared)
        T.gemm(S_shared, kv_stage, acc_o, policy=T.GemmWarpPolicy.FullCol)
        T.barrier_arrive(empty)

    @T.macro
    def consume_t(Q_shared, Qpe_shared, kv_stage, pe_stage, P_shared, acc_s, acc_o, m_prev, m_cur, alpha, p_sum,
                  logsum, full, empty, kv_scale, seqlen, start, k):
        """The transposed step: acc_s [block_N, block_H] = S^T, acc_o [dim, block_H] = O^T."""
        pos = start + k * block_N
        T.barrier_wait(full, (k // 2) % 2)
        T.clear(acc_s)
        T.gemm(kv_stage, Q_shared, acc_s, transpose_B=True)
        for i, j in T.Parallel(block_N, block_H):
            acc_s[i, j] = acc_s[i, j] * kv_scale
        T.gemm(pe_stage, Qpe_shared, acc_s, transpose_B=True)
        for i, j in T.Parallel(block_N, block_H):
            acc_s[i, j] = T.if_then_else(pos + i < seqlen, acc_s[i, j], NEG)
        T.copy(m_cur, m_prev)
        T.reduce_max(acc_s, m_cur, dim=0, clear=False)
        for j in T.Parallel(block_H):
            alpha[j] = T.exp2((m_prev[j] - m_cur[j]) * scale)
        for i, j in T.Parallel(block_N, block_H):
            acc_s[i, j] = T.exp2((acc_s[i, j] - m_cur[j]) * scale)
        T.reduce_sum(acc_s, p_sum, dim=0)
        for j in T.Parallel(block_H):
            logsum[j] = logsum[j] * alpha[j] + p_sum[j]
        for i, j in T.Parallel(dim, block_H):
            acc_o[i, j] = acc_o[i, j] * alpha[j]
        T.copy(acc_s, P_shared)
        T.gemm(kv_stage, P_shared, acc_o, transpose_A=True)
        T.barrier_arrive(empty)

    @T.prim_func
    def main(Q_nope: T.Tensor([batch, heads, dim], dtype), Q_pe: T.Tensor([batch, heads, pe_dim], dtype),
             KV: T.Tensor([batch, seq_kv, dim], kv_dtype), K_pe: T.Tensor([batch, seq_kv, pe_dim], dtype),
             KV_scale: T.Tensor([1], "float32"), Seqlens: T.Tensor([batch], "int32"),
             O_partial: T.Tensor([batch, heads, num_split, dim], accum_dtype),
             LSE_partial: T.Tensor([batch, heads, num_split], accum_dtype)):
        with T.Kernel(T.ceildiv(heads, block_H), num_split, batch, threads=2 * G) as (hb, sid, bz):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            Qpe_shared = T.alloc_shared([block_H, pe_dim], dtype)
            KV_0 = T.alloc_shared([block_N, dim], dtype)
            KV_1 = T.alloc_shared([block_N, dim], dtype)
            Kpe_0 = T.alloc_shared([block_N, pe_dim], dtype)
            Kpe_1 = T.alloc_shared([block_N, pe_dim], dtype)
            KV_fp8 = T.alloc_shared([block_N, dim] if widen_from == "shared" else [1, 16], kv_dtype)
            S_shared = T.alloc_shared([block_N, block_H] if transposed else [block_H, block_N], dtype)
            acc_s = T.alloc_fragment([block_N, block_H] if transposed else [block_H, block_N], accum_dtype)
            acc_o = T.alloc_fragment([dim, block_H] if transposed else [block_H, dim], accum_dtype)
            m_prev = T.alloc_fragment([block_H], accum_dtype)
            m_cur = T.alloc_fragment([block_H], accum_dtype)
            alpha = T.alloc_fragment([block_H], accum_dtype)
            p_sum = T.alloc_fragment([block_H], accum_dtype)
            logsum = T.alloc_fragment([block_H], accum_dtype)
            kv_r = T.alloc_fragment([block_N, dim] if widen_from == "regs" else [1, 16], kv_dtype)
            pe_r = T.alloc_fragment([block_N, pe_dim], dtype)
            full = T.alloc_barrier([G, G])     # stage s filled: the producer's 128 threads arrive
            empty = T.alloc_barrier([G, G])    # stage s read: the consumer's 128 threads arrive

            tx = T.get_thread_binding()
            kv_scale = KV_scale[0]
            seqlen = Seqlens[bz]
            start = sid * chunk
            n_blocks = T.max(T.min(T.ceildiv(seqlen - start, block_N), chunk // block_N), 0)
            T.copy(Q_nope[bz, hb * block_H:(hb + 1) * block_H, :], Q_shared)
            T.copy(Q_pe[bz, hb * block_H:(hb + 1) * block_H, :], Qpe_shared)
            if tx >= G:
                for k in T.serial(n_blocks):
                    if k % 2 == 0:
                        produce(KV, K_pe, KV_fp8, kv_r, pe_r, KV_0, Kpe_0, full[0], empty[0], bz, start, k)
                    else:
                        produce(KV, K_pe, KV_fp8, kv_r, pe_r, KV_1, Kpe_1, full[1], empty[1], bz, start, k)
            else:
                T.fill(acc_o, 0)
                T.fill(logsum, 0)
                T.fill(m_cur, NEG)
                for k in T.serial(n_blocks):
                    if transposed:
                        if k % 2 == 0:
                            consume_t(Q_shared, Qpe_shared, KV_0, Kpe_0, S_shared, acc_s, acc_o, m_prev, m_cur, alpha,
                                      p_sum, logsum, full[0], empty[0], kv_scale, seqlen, start, k)
                        else:
                            consume_t(Q_shared, Qpe_shared, KV_1, Kpe_1, S_shared, acc_s, acc_o, m_prev, m_cur, alpha,
                                      p_sum, logsum, full[1], empty[1], kv_scale, seqlen, start, k)
                    elif k % 2 == 0:
                        consume(Q_shared, Qpe_shared, KV_0, Kpe_0, S_shared, acc_s, acc_o, m_prev, m_cur, alpha, p_sum,
                                logsum, full[0], empty[0], kv_scale, seqlen, start, k)
                    else:
                        consume(Q_shared, Qpe_shared, KV_1, Kpe_1, S_shared, acc_s, acc_o, m_prev, m_cur, alpha, p_sum,
                                logsum, full[1], empty[1], kv_scale, seqlen, start, k)
                if transposed:
                    for i, j in T.Parallel(dim, block_H):
                        if hb * block_H + j < heads:
                            O_partial[bz, hb * block_H + j, sid, i] = T.if_then_else(
                                logsum[j] > 0, acc_o[i, j] * kv_scale / logsum[j], 0.0)
                else:
                    for i, j in T.Parallel(block_H, dim):
                        acc_o[i, j] = T.if_then_else(logsum[i] > 0, acc_o[i, j] * kv_scale / logsum[i], 0.0)
                    T.copy(acc_o, O_partial[bz, hb * block_H:(hb + 1) * block_H, sid, :])
                for i in T.Parallel(block_H):
                    logsum[i] = T.if_then_else(logsum[i] > 0, T.log2(logsum[i]) + m_cur[i] * scale, NEG)
                T.copy(logsum, LSE_partial[bz, hb * block_H:(hb + 1) * block_H, sid])
    return main


def gqa_decode(q, k, v, seqlens, block_table=None, num_split=None, **config):
    """O [batch, heads, dim] of one decode step (both kernels).  Paged when block_table is given.
    num_split None: `decode_splits` for this shape and device."""
    import torch
    batch, heads, dim = q.shape
    if block_table is None:
        _, seq_kv, kv_heads, _ = k.shape
        block_table = torch.zeros(batch, 1, dtype=torch.int32, device=q.device)
        paging = {}
    else:
        num_pages, page_size, kv_heads, _ = k.shape
        seq_kv = block_table.shape[1] * page_size
        paging = dict(page_size=page_size, num_pages=num_pages)
    if num_split is None:
        num_split = decode_splits(kv_heads * batch, seq_kv, config.get("block_N", 64))
    dtype = str(q.dtype).replace("torch.", "")
    o_part, lse_part = gqa_decode_split(batch, heads, kv_heads, seq_kv, dim, num_split, dtype=dtype,
                                        **paging, **config)(q, k, v, seqlens, block_table)
    return decode_combine(batch, heads, num_split, dim, dtype=dtype)(o_part, lse_part)


# mla_decode's fp8-KV kernel at <= 16 heads a block: "rows" (mla_decode_split), "t" (mla_decode_split_t) or "ws"
# (mla_decode_split_ws); measured on the H200 in session 31 (benchmarks/results/2026-12-05_h200_s31_mla.md)
MLA_FP8_FORM = "t"
MLA_FP8_FORMS = ("rows", "t", "ws")


def mla_decode_config(heads: int) -> dict:
    """The split kernel's tile for `heads` query heads: up to 64 heads a block; at 16 or fewer, 32 KV rows a
    step on four warps (H200, session 23, B64 H16 KV8K split + combine: bf16 KV 164 -> 151 us, 88 -> 96 % of
    the copy; fp8 KV 232 -> 209 us, 35 -> 39 %; 64 rows on eight warps before).  fp8 KV at 16 or fewer heads
    runs `mla_decode_split_t` by default (`MLA_FP8_FORM`), which takes block_H only."""
    block_H = min(64, heads)
    return dict(block_H=block_H, block_N=32, threads=128) if block_H <= 16 else dict(block_H=block_H)


def mla_decode_kernel(batch: int, heads: int, seq_kv: int, dim: int, pe_dim: int, num_split: int,
                      dtype: str = "bfloat16", kv_dtype: str = "bfloat16", form=None, **config):
    """The split kernel `mla_decode` runs for this shape (config: `mla_decode_config`'s keys).  form, for fp8 KV
    at <= 16 heads a block: "rows" (`mla_decode_split`), "t" (`mla_decode_split_t`, transposed, 64-row tiles),
    "ws" (`mla_decode_split_ws`, warp-specialized by hand); None: `MLA_FP8_FORM`.  Other shapes: "rows" only."""
    config = {**mla_decode_config(heads), **config}
    small = kv_dtype != dtype and config.get("block_H", 64) <= 16
    form = form or (MLA_FP8_FORM if small else "rows")
    if form not in MLA_FP8_FORMS:
        raise ValueError(f"mla_decode: form={form!r} is not one of {MLA_FP8_FORMS}")
    if form == "rows":
        return mla_decode_split(batch, heads, seq_kv, dim, pe_dim, num_split, dtype=dtype, kv_dtype=kv_dtype, **config)
    if not small:
        raise ValueError(f"mla_decode(form={form!r}): that kernel is the fp8-KV form at <= 16 heads a block")
    if form == "t":
        return mla_decode_split_t(batch, heads, seq_kv, dim, pe_dim, num_split, block_H=config["block_H"],
                                  dtype=dtype, kv_dtype=kv_dtype)
    return mla_decode_split_ws(batch, heads, seq_kv, dim, pe_dim, num_split, block_H=config["block_H"], dtype=dtype,
                               kv_dtype=kv_dtype)


def mla_decode(q_nope, q_pe, kv, k_pe, seqlens, kv_scale=None, num_split=None, form=None, **config):
    """O [batch, heads, dim] of one MLA decode step: `mla_decode_kernel`'s split kernel (`form`), then the combine.
    Tensors on the CPU (the CPU target) take "rows" unless a form is named: it is the CPU target's fastest
    (`bench.py --only decode --cpu`, B1 H16 KV512 fp8: rows 0.30 ms, t 0.60, ws 5.5 -- ws runs with the block's
    threads emulated)."""
    import torch
    if form is None and not kv.is_cuda:
        form = "rows"
    batch, heads, dim = q_nope.shape
    config = {**mla_decode_config(heads), **config}
    seq_kv, pe_dim = kv.shape[1], k_pe.shape[-1]
    if num_split is None:
        num_split = mla_decode_splits(batch, heads, seq_kv, config.get("block_H", 64), config.get("block_N", 64))
    if kv_scale is None:
        kv_scale = torch.ones(1, dtype=torch.float32, device=kv.device)
    dtype, kv_dtype = (str(t.dtype).replace("torch.", "") for t in (q_nope, kv))
    split = mla_decode_kernel(batch, heads, seq_kv, dim, pe_dim, num_split, dtype, kv_dtype, form, **config)
    o_part, lse_part = split(q_nope, q_pe, kv, k_pe, kv_scale, seqlens)
    return decode_combine(batch, heads, num_split, dim, dtype=dtype)(o_part, lse_part)


def ref_gqa_decode(q, k, v, seqlens, block_table=None):
    """fp32 softmax(q k^T / sqrt(d)) v per sequence over its first seqlens[b] positions."""
    import torch
    batch, heads, dim = q.shape
    if block_table is not None:   # gather the pages into a contiguous cache
        k, v = (t[block_table.long()].flatten(1, 2) for t in (k, v))
    kv_heads = k.shape[2]
    out = torch.empty(batch, heads, dim, dtype=torch.float32, device=q.device)
    for b in range(batch):
        n = int(seqlens[b])
        kb = k[b, :n].float().repeat_interleave(heads // kv_heads, dim=1)   # [n, heads, dim]
        vb = v[b, :n].float().repeat_interleave(heads // kv_heads, dim=1)
        s = torch.einsum("hd,nhd->hn", q[b].float(), kb) / math.sqrt(dim)
        out[b] = torch.einsum("hn,nhd->hd", s.softmax(-1), vb)
    return out


def ref_mla_decode(q_nope, q_pe, kv, k_pe, seqlens, kv_scale=None):
    import torch
    batch, heads, dim = q_nope.shape
    scale = 1.0 if kv_scale is None else float(kv_scale[0])
    out = torch.empty(batch, heads, dim, dtype=torch.float32, device=q_nope.device)
    for b in range(batch):
        n = int(seqlens[b])
        kvb = kv[b, :n].float() * scale
        s = (q_nope[b].float() @ kvb.t() + q_pe[b].float() @ k_pe[b, :n].float().t()) / math.sqrt(dim + k_pe.shape[-1])
        out[b] = s.softmax(-1) @ kvb
    return out

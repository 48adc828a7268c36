"""FlashAttention backward configurations on a GPU (issue 25; session 17 probe, H200 results in benchmarks/results/2026-12-03_h200_s17_attention_bwd.md).
Times preprocess + bwd + postprocess like bench.py's row, against SDPA's backward in the same run (CUDA events,
median), checks each config against torch autograd (fp32).  dq='none' is a diagnostic (dQ not accumulated:
the atomics' share of the time); its error is not checked."""
import math, sys, time, json
import torch, torch.nn.functional as F
import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.kernels import attention_bwd as A

LOG2E = 1.44269504


@tilelang.jit(pass_configs={"tl.enable_fast_math": True})
def bwd(batch, heads, seq_len, dim, is_causal=False, block_M=64, block_N=64, num_stages=2, threads=128,
        dq="atomic", dq_policy="square", dq_layout="bhsd", stagger=False, dtype="float16", accum_dtype="float"):
    sm_scale = 1.0 / math.sqrt(dim)
    scale = sm_scale * LOG2E
    shape = [batch, seq_len, heads, dim]
    stats = [batch, heads, seq_len]
    pol = {"square": T.GemmWarpPolicy.Square, "row": T.GemmWarpPolicy.FullRow, "col": T.GemmWarpPolicy.FullCol}[dq_policy]

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             dO: T.Tensor(shape, dtype), LSE: T.Tensor(stats, accum_dtype), Delta: T.Tensor(stats, accum_dtype),
             dQ: T.Tensor([batch, heads, seq_len, dim] if dq_layout == "bhsd" else shape, accum_dtype),
             dK: T.Tensor(shape, dtype), dV: T.Tensor(shape, dtype)):
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
            dqf = T.alloc_fragment([block_N, dim], accum_dtype)
            dv = T.alloc_fragment([block_M, dim], accum_dtype)
            dk = T.alloc_fragment([block_M, dim], accum_dtype)
            T.copy(K[bz, bx * block_M:(bx + 1) * block_M, by, :], K_shared)
            T.copy(V[bz, bx * block_M:(bx + 1) * block_M, by, :], V_shared)
            T.clear(dv)
            T.clear(dk)
            loop_st = T.floordiv(bx * block_M, block_N) if is_causal else 0
            loop_ed = T.ceildiv(seq_len, block_N)
            for kk in T.Pipelined(loop_st, loop_ed, num_stages=num_stages):
                # stagger: key block bx starts at query block loop_st + bx (mod the range), so the blocks of one
                # head running at once add into different dQ tiles
                k = loop_st + (kk - loop_st + bx) % (loop_ed - loop_st) if stagger else kk
                T.copy(Q[bz, k * block_N:(k + 1) * block_N, by, :], q)
                T.clear(qkT)
                T.gemm(K_shared, q, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(LSE[bz, by, k * block_N:(k + 1) * block_N], lse_shared)
                for i, j in T.Parallel(block_M, block_N):
                    qkT[i, j] = T.exp2(qkT[i, j] * scale - lse_shared[j] * LOG2E)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        qkT[i, j] = T.if_then_else(k * block_N + j >= bx * block_M + i, qkT[i, j], 0)
                T.copy(dO[bz, k * block_N:(k + 1) * block_N, by, :], do)
                T.clear(dsT)
                T.gemm(V_shared, do, dsT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(qkT, qkT_cast)
                T.gemm(qkT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow)
                T.copy(Delta[bz, by, k * block_N:(k + 1) * block_N], delta_shared)
                for i, j in T.Parallel(block_M, block_N):
                    dsT_cast[i, j] = qkT[i, j] * (dsT[i, j] - delta_shared[j]) * sm_scale
                T.gemm(dsT_cast, q, dk, policy=T.GemmWarpPolicy.FullRow)
                if dq != "none":
                    T.copy(dsT_cast, dsT_shared)
                    T.clear(dqf)
                    if dq != "nogemm":
                        T.gemm(dsT_shared, K_shared, dqf, transpose_A=True, policy=pol)
                    if dq == "noadd":
                        T.copy(dqf, dq_shared)
                    elif dq in ("shared", "nogemm"):
                        T.copy(dqf, dq_shared)
                        T.atomic_add(dQ[bz, by, k * block_N:(k + 1) * block_N, :] if dq_layout == "bhsd" else
                                     dQ[bz, k * block_N:(k + 1) * block_N, by, :], dq_shared)
                    else:
                        T.atomic_add(dQ[bz, by, k * block_N:(k + 1) * block_N, :] if dq_layout == "bhsd" else
                                     dQ[bz, k * block_N:(k + 1) * block_N, by, :], dqf)
            T.copy(dv, dV[bz, bx * block_M:(bx + 1) * block_M, by, :])
            T.copy(dk, dK[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return main


def bench(fn, n=30):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


CONFIGS = [dict(block_M=128, block_N=128, num_stages=1, threads=256, dq=m) for m in ("shared", "none")]
CONFIGS += [dict(block_M=128, block_N=128, num_stages=2, threads=256, dq="shared"), dict(block_M=128, block_N=64, num_stages=2, threads=256, dq="shared"), dict(block_M=64, block_N=64, num_stages=2, threads=128, dq="shared")]
OLD = [
           dict(block_M=64, block_N=64, num_stages=2, threads=128, dq="none"),
           dict(block_M=64, block_N=64, num_stages=1, threads=128),
           dict(block_M=64, block_N=64, num_stages=3, threads=128),
           dict(block_M=128, block_N=64, num_stages=2, threads=256),
           dict(block_M=128, block_N=64, num_stages=2, threads=256, dq_policy="col"),
           dict(block_M=128, block_N=64, num_stages=2, threads=256, dq="none"),
           dict(block_M=128, block_N=128, num_stages=2, threads=256),
           dict(block_M=128, block_N=128, num_stages=2, threads=256, dq_policy="col"),
           dict(block_M=64, block_N=128, num_stages=2, threads=128),
           dict(block_M=128, block_N=32, num_stages=2, threads=256),
           dict(block_M=128, block_N=64, num_stages=2, threads=128)]

if __name__ == "__main__":
    import os
    # PROBE_CONFIGS / PROBE_SHAPES (JSON lists) replace the defaults: [{"block_M": 128, ...}], [[4, 16, 4096, 128, false]]
    CONFIGS = json.loads(os.environ.get("PROBE_CONFIGS", "null")) or CONFIGS
    shapes = [tuple(x) for x in json.loads(os.environ.get("PROBE_SHAPES", "null")) or
              [(4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (4, 16, 4096, 64, False), (4, 16, 4096, 64, True)]]
    res = []
    torch.manual_seed(0)
    for b, h, s, d, causal in shapes:
        q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16) for _ in range(4))
        qt, kt, vt = (t.transpose(1, 2).contiguous().requires_grad_(True) for t in (q, k, v))
        dot = do.transpose(1, 2).contiguous()
        o_t = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        o, lse = A.flash_attention_fwd_lse(b, h, s, d, causal)(q, k, v)
        ref = torch.cat([g.flatten() for g in A.ref_attention_backward(q, k, v, do, causal)])
        t_ref = bench(lambda: torch.autograd.grad(o_t, (qt, kt, vt), dot, retain_graph=True))
        flops = 10 * b * h * s * s * d // (2 if causal else 1)
        pre = A.flash_attention_bwd_preprocess(b, h, s, d)
        post = A.flash_attention_bwd_postprocess(b, h, s, d)
        for cfg in CONFIGS:
            name = "/".join(f"{kk}={vv}" for kk, vv in cfg.items())
            t0 = time.time()
            try:
                kern = bwd(b, h, s, d, causal, **cfg)
                plan = kern.get_plan() if hasattr(kern, "get_plan") else ""
            except Exception as e:  # noqa: BLE001
                print(f"D{d} {'causal' if causal else 'full'} {name}: COMPILE {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            ct = time.time() - t0
            bhsd = cfg.get("dq_layout", "bhsd") == "bhsd"   # bshd: the accumulator cast by torch (not the postprocess)
            dq_acc = torch.zeros((b, h, s, d) if bhsd else q.shape, dtype=torch.float32, device="cuda")
            dk, dv = torch.empty_like(k), torch.empty_like(v)

            def run():
                dq_acc.zero_()
                kern(q, k, v, do, lse, pre(o, do), dq_acc, dk, dv)
                return (post(dq_acc) if bhsd else dq_acc.half()), dk, dv
            got = torch.cat([g.flatten().float() for g in run()])
            err = ((got - ref).abs().max() / ref.abs().max()).item()
            t = bench(run)
            gemm_lines = [l for l in str(plan).splitlines() if "gemm" in l.lower()][:6]
            row = dict(shape=f"D{d} {'causal' if causal else 'full'}", cfg=name, ms=t, ref_ms=t_ref, ratio=t_ref / t,
                       tflops=flops / t / 1e9, err=err, compile_s=ct)
            res.append(row)
            print(f"{row['shape']:12s} {name:70s} {t:7.3f} ms  ref {t_ref:7.3f}  {t_ref/t:5.2f}x  {flops/t/1e9:6.1f} TF/s  err {err:.1e}  compile {ct:.1f}s", flush=True)
            for l in gemm_lines:
                print("      ", l.strip()[:160])
    json.dump(res, open(os.path.join(os.environ.get("OUT", "/tmp"), "fabwd.json"), "w"), indent=1)

"""NOT RUN YET (session 31: no machine was lent when it was ready). Per-tensor fp8 GEMM (e4m3 -> bf16, 128x256x128/256, `kernels/gemm_fp8.fp8_matmul`) beside
torch._scaled_mm (per-tensor, use_fast_accum=True, as the bench) at 4096^3 and 8192^3: the default form
already walks its tiles persistently ("auto"); does a fourth stage, two stages, a producer warpgroup, or
a 256x128 tile lift it past 1.0x, and what does the persistent walk give (`tc.persistent_tiles` False)?
Prediction (session 31): the walk +2-4 % over the plain grid (an fp8 tile's main loop is half an fp16
one's, so the epilogue and the first loads weigh twice as much); a fourth stage +0-1 %; the rest no gain.  Interleaved rounds, CUDA events, medians; each variant checked against the
float32 reference first."""
import json, os, statistics, sys
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_timing import timeit   # probes/sources/probe_timing.py
import tilecraft
from tilecraft.kernels import gemm_fp8 as G

VARIANTS = {   # name: (block_M, block_N, stages, pass configs)
    "base": (128, 256, 3, {}),
    "nopersist": (128, 256, 3, {"tc.persistent_tiles": False}),
    "st4": (128, 256, 4, {}),
    "st2": (128, 256, 2, {}),
    "ws": (128, 256, 3, {"tc.warp_specialize": True}),
    "m256": (256, 128, 3, {}),
}
out = {}
for s in (4096, 8192):
    torch.manual_seed(s)
    a, b = torch.randn(s, s, device="cuda"), torch.randn(s, s, device="cuda")
    qa, sa = G.quantize_fp8_per_tensor(a)
    qb, sb = G.quantize_fp8_per_tensor(b)
    ref = G.ref_fp8_matmul(qa, qb, sa, sb).float()
    c = torch.empty(s, s, dtype=torch.bfloat16, device="cuda")
    fns = {"torch": lambda: torch._scaled_mm(qa, qb.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                             use_fast_accum=True)}
    for name, (bm, bn, stages, cfg) in VARIANTS.items():
        try:
            prog = G.fp8_matmul.get_tir(s, s, s, block_M=bm, block_N=bn, threads=256, num_stages=stages,
                                        out_dtype="bfloat16")
            k = tilecraft.compile(prog, out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"}, pass_configs=cfg)
            c.fill_(float("nan"))
            k(qa, qb, sa, sb, c)
            torch.cuda.synchronize()
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
            out[f"{s}:{name}:err"] = err
            if not err < 1e-2:
                print(s, name, "WRONG", err, flush=True)
                continue
            fns[name] = (lambda k=k: k(qa, qb, sa, sb, c))
        except Exception as e:  # noqa: BLE001 - a variant the compiler refuses: say so, go on
            out[f"{s}:{name}:error"] = f"{type(e).__name__}: {e}"[:300]
            print(s, name, "ERROR", out[f"{s}:{name}:error"], flush=True)
    times = {n: [] for n in fns}
    iters = 20 if s == 4096 else 5
    for r in range(9):
        for n, f in fns.items():
            times[n].append(timeit(f, iters))
    t_ref = statistics.median(times["torch"])
    for n, ts in times.items():
        m = statistics.median(ts)
        out[f"{s}:{n}:ms"] = m
        print(f"{s}^3 {n:12s} {m:.4f} ms  {2 * s ** 3 / m / 1e9:.0f} TFLOP/s  torch/ours {t_ref / m:.3f}", flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "probe_fp8_persistent.json"), "w"), indent=1)

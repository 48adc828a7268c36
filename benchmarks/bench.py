"""One benchmark for one device call: build, check and time every reference kernel side by side
with its torch reference, in the same run, and print a table last.

    python3 benchmarks/bench.py [--quick] [--only gemm,softmax] [--list]

Method (/work/shared/BENCH.md, /work/.library/device/METHOD.md): fresh random inputs; our output
poisoned with NaN and checked against the reference's output (relative Frobenius error);
CUDA-event timing through `tilecraft.profiler.do_bench` (median, warm-up, L2 flushed between
calls); achieved TB/s (minimum bytes) or TFLOP/s, and % of the ceiling: the device-to-device copy
measured in this run for memory-bound kernels, the datasheet dense fp16/bf16 rate for matmuls.
Two questions, kept apart: the check compares our output with an accurate fp32 reference that
is never timed; the timing compares with the fastest torch way to compute the same thing
(torch.add, cuBLAS through torch.matmul, fp16 addmm + gelu, torch.softmax, F.rms_norm, SDPA;
where torch has several spellings each is timed and the fastest is the reference), named in the
"ref" column.  Without a GPU (or with --cpu) the same groups that make sense there run on the
CPU target at small sizes, with the fp32-upcast spellings among the torch candidates; results go
only to $OUT then.  "ours/ref" is the speed ratio ref_ms / ours_ms (> 1: we are faster; for host launch
time it is ours / torch.add, lower is better); every row where we are slower says so in "note".  A kernel that fails gets a row saying so; if a failure leaves
the CUDA context unusable, the remaining groups run in a fresh child process.  Results go to
benchmarks/results/<date>_<gpu>.{md,json} and to $OUT when set.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
from tilecraft.profiler.bench import host_time_us  # noqa: E402
import torch.nn.functional as F  # noqa: E402

GROUPS = ["copy", "vector_add", "axpby", "softmax", "rmsnorm", "gemm", "gemm_bias_gelu",
          "flash_attention", "attention_bwd", "fp8_gemm", "decode", "grouped_gemm", "compile", "launch"]
DENSE_PEAK_TFLOPS = {"H200": 989.4, "H100": 989.4, "H800": 989.4, "A100": 312.0, "L40S": 362.0,
                     "RTX 4090": 165.2}  # fp16/bf16 dense tensor-core rates (datasheets)
BENCH_MD_COPY_TBPS = 4.04
CPU_GROUPS = ["vector_add", "axpby", "softmax", "rmsnorm", "gemm", "gemm_bias_gelu", "flash_attention",
              "attention_bwd", "decode", "grouped_gemm", "launch"]
ROUNDS, ROUND_MS = 5, 40   # each timed row: ours and torch in turn, 5 times, 40 ms of calls each
STATE = {"quick": False, "copy_tbps": None, "peak_tflops": None, "device": "cuda"}


def on_cpu() -> bool:
    """The CPU target (no GPU here): small problems, perf_counter timing, no L2 flush, and torch
    references picked among fp16 and fp32-upcast spellings (whichever is faster on this CPU)."""
    return STATE["device"] == "cpu"


def pick(gpu, gpu_quick, cpu):
    """A problem size for this run."""
    return cpu if on_cpu() else (gpu_quick if STATE["quick"] else gpu)


def sync():
    if not on_cpu():
        torch.cuda.synchronize()


def rungs_wanted() -> bool:
    """The rows that time the Hopper path's rungs (mma.sync, cp.async, unsplit, split) beside the
    default one: on an sm_90 GPU, unless BENCH_RUNGS=0 (a shorter run)."""
    import os
    return hopper() and os.environ.get("BENCH_RUNGS", "1") != "0"


def hopper() -> bool:
    return not on_cpu() and torch.cuda.get_device_capability() == (9, 0)


# ---- helpers ---------------------------------------------------------------------------------
def rand(*shape, dtype=torch.float16, scale=1.0):
    return (torch.randn(*shape, device=STATE["device"]) * scale).to(dtype)


def nan_like(t):
    return torch.full_like(t, float("nan"))


def rel_err(out, ref) -> float:
    out, ref = out.double(), ref.double()
    if not torch.isfinite(out).all():
        return float("nan")
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def timeit(fn, flush="clean", rep=None) -> float:
    """Median ms; L2 flushed before every call ("clean": a 256 MB read, "dirty": a 256 MB memset whose
    dirty lines the timed kernel must write back -- see tilecraft/profiler/bench.py)."""
    from tilecraft.profiler import do_bench
    quick = STATE["quick"]
    if on_cpu():
        return do_bench(fn, warmup=5, rep=rep or (20 if quick else 50), return_mode="median", device="cpu")
    return do_bench(fn, warmup=10 if quick else 25, rep=rep or (30 if quick else 100), return_mode="median",
                    flush_l2=flush)


def row(kernel, size, **kw):
    r = {"kernel": kernel, "size": size, "check": "", "err": None, "ours_ms": None, "ref_ms": None,
         "speed": None, "achieved": None, "unit": "", "pct": None, "note": ""}
    r.update(kw)
    return r


def fastest_torch(candidates, flush="clean"):
    """(name, fn) of the fastest of several torch spellings of one computation, timed here."""
    if len(candidates) == 1:
        return candidates[0]
    timed = [(timeit(fn, flush), name, fn) for name, fn in candidates]
    _, name, fn = min(timed, key=lambda t: t[0])
    return name, fn


def case(rows, kernel, size, build, ref, tol, bytes_=None, flops=None, ref_name="torch", flush="clean",
         peak_scale=1.0):
    """Build ours (build() -> (run, out)); ref() -> (the torch run to time, an accurate fp32 output
    to check against); check, then time both.  `peak_scale`: the kernel's tensor-core peak over the
    fp16/bf16 one the "% ceil" column divides by (fp8: 2, the datasheets' dense fp8 rate)."""
    r = row(kernel, size, ref_name=ref_name, note="dirty-L2 flush" if flush == "dirty" else "")
    rows.append(r)
    try:
        ref_run, ref_out = ref()
        ours_run, out = build()
        ours_run()
        sync()
        err = rel_err(out, ref_out)
        r["err"] = err
        r["check"] = ("PASS" if err < tol else "FAIL") + (f" {err:.1e}" if not math.isnan(err) else " NaN")
        # ref, ours, ref, ours, ...: clocks drift over a run (the H200 slows as it warms: cuBLAS alone
        # moves 620-770 TFLOP/s at 4096^3, addmm + gelu 0.47-0.52 ms within one run), so the two sides
        # are timed in turn, ROUNDS times; speed is the median of the per-round ratios, the times medians
        ref_ms, ours_ms = [], []
        for _ in range(1 if STATE["quick"] else ROUNDS):
            ref_ms.append(timeit(ref_run, flush, rep=None if STATE["quick"] else ROUND_MS))
            ours_ms.append(timeit(ours_run, flush, rep=None if STATE["quick"] else ROUND_MS))
        ratios = sorted(a / b for a, b in zip(ref_ms, ours_ms))
        r["ref_ms"], r["ours_ms"] = statistics.median(ref_ms), statistics.median(ours_ms)
        r["speed"], r["speed_range"] = statistics.median(ratios), (ratios[0], ratios[-1])
        scale, prefix = (1e6, "G") if on_cpu() else (1e9, "T")
        if bytes_:
            r["achieved"], r["unit"] = bytes_ / r["ours_ms"] / scale, f"{prefix}B/s"
            if STATE["copy_tbps"]:
                r["pct"] = 100 * r["achieved"] / STATE["copy_tbps"]
        elif flops:
            r["achieved"], r["unit"] = flops / r["ours_ms"] / scale, f"{prefix}FLOP/s"
            if STATE["peak_tflops"]:
                r["pct"] = 100 * r["achieved"] / (STATE["peak_tflops"] * peak_scale)
    except Exception as e:  # noqa: BLE001 - a failing kernel is a row, not the end of the run
        msg = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
        r["check"] = f"ERROR {type(e).__name__}: {msg}"
    return r


# ---- groups ----------------------------------------------------------------------------------
def g_copy(rows):
    n = (1 << 26) if STATE["quick"] else (1 << 28)  # 256 MiB / 1 GiB of fp32
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    ms = timeit(lambda: dst.copy_(src))
    STATE["copy_tbps"] = 2 * 4 * n / ms / 1e9
    rows.append(row("copy (ceiling)", f"{4 * n >> 20} MiB", check="-", ref_ms=ms, achieved=STATE["copy_tbps"],
                    unit="TB/s", pct=100 * STATE["copy_tbps"] / BENCH_MD_COPY_TBPS,
                    note="pct vs BENCH.md 4.04 TB/s"))
    # the same copy at the size of the softmax/RMSNorm problems: small transfers pay ramp-up and
    # tail effects, so this is the realistic ceiling for those rows
    small = torch.randn(16384 * 1024 // 2, device="cuda")
    small_dst = torch.empty_like(small)
    for flush in ("clean", "dirty"):
        ms = timeit(lambda: small_dst.copy_(small), flush)
        rows.append(row("copy (softmax size)", "32 MiB", check="-", ref_ms=ms,
                        achieved=2 * 4 * small.numel() / ms / 1e9, unit="TB/s",
                        pct=100 * 2 * 4 * small.numel() / ms / 1e9 / BENCH_MD_COPY_TBPS,
                        note="same bytes as softmax 16384x1024 fp16" + ("; dirty-L2 flush" if flush == "dirty" else "")))


def g_vector_add(rows):
    import tilecraft.kernels as K
    n = pick(1 << 26, 1 << 22, 1 << 20)
    a, b = rand(n, dtype=torch.float32), rand(n, dtype=torch.float32)
    c = nan_like(a)

    def build():
        k = K.vector_add(n)
        return (lambda: k(a, b, c)), c
    case(rows, "vector_add fp32", f"{n >> 20}M", build, lambda: (lambda: torch.add(a, b), a.double() + b.double()),
         1e-6, bytes_=12 * n, ref_name="torch.add")


def g_axpby(rows):
    import tilecraft.kernels as K
    m, n = pick((8192, 8192), (2048, 2048), (512, 512))
    x, y = rand(m, n), rand(m, n)
    z = nan_like(x)

    def build():
        k = K.axpby(m, n)
        return (lambda: k(x, y, z)), z
    name, fn = fastest_torch([("2.0 * x - 0.5 * y", lambda: 2.0 * x - 0.5 * y),
                              ("torch.add(2.0 * x, y, alpha=-0.5)", lambda: torch.add(2.0 * x, y, alpha=-0.5))])
    case(rows, "axpby fp16", f"{m}x{n}", build, lambda: (fn, K.ref_axpby(x.float(), y.float())),
         1e-2, bytes_=6 * m * n, ref_name=name)


SOFTMAX_CONFIGS = {1024: [dict(block_M=4, threads=128), dict(block_M=8, threads=256)],
                   8192: [dict(block_M=1, threads=256), dict(block_M=1, threads=512), dict(block_M=2, threads=512)]}


def g_softmax(rows):
    import tilecraft.kernels as K
    for m, n in pick([(16384, 1024), (4096, 8192)], [(1024, 1024)], [(301, 1000)]):
        x = rand(m, n, scale=3.0)
        y = nan_like(x)
        cfgs = SOFTMAX_CONFIGS.get(n, [dict(block_M=4, threads=128)])
        # the first config again under the dirty-L2 flush, so both timing methods are in one table
        for cfg, flush in [(c, "clean") for c in cfgs] + ([] if on_cpu() else [(cfgs[0], "dirty")]):
            def build(m=m, n=n, x=x, y=y, cfg=cfg):
                k = K.softmax(m, n, **cfg)
                return (lambda: k(x, y)), y
            name, fn = fastest_torch([("torch.softmax fp16", lambda x=x: torch.softmax(x, -1))] + (
                [("torch.softmax fp32 + cast", lambda x=x: torch.softmax(x.float(), -1).half())] if on_cpu() else []))
            case(rows, f"softmax fp16 {cfg['block_M']}/{cfg['threads']}", f"{m}x{n}", build,
                 lambda x=x, fn=fn: (fn, torch.softmax(x.float(), -1)), 1e-2, bytes_=4 * m * n,
                 flush=flush, ref_name=name)


def g_rmsnorm(rows):
    import tilecraft.kernels as K
    m, n = pick((16384, 4096), (2048, 4096), (301, 1024))
    x, w = rand(m, n, dtype=torch.bfloat16), rand(n, dtype=torch.bfloat16)
    y = nan_like(x)

    xf = x.float()
    accurate = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    if hasattr(F, "rms_norm"):
        ref_name, f = "F.rms_norm", (lambda: F.rms_norm(x, (n,), w, 1e-6))
    else:
        ref_name = "torch eager formula (this torch has no F.rms_norm)"
        f = lambda: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w).to(x.dtype)  # noqa: E731

    def ref():
        return f, accurate
    cfgs = (dict(block_M=2, threads=256), dict(block_M=1, threads=512), dict(block_M=4, threads=512))
    for cfg in cfgs[:1] if on_cpu() else cfgs:
        def build(cfg=cfg):
            k = K.rmsnorm(m, n, **cfg)
            return (lambda: k(x, w, y)), y
        case(rows, f"rmsnorm bf16 {cfg['block_M']}/{cfg['threads']}", f"{m}x{n}", build, ref, 1e-2,
             bytes_=4 * m * n + 2 * n, ref_name=ref_name)


# 8 warps on a 128x128 tile (32x64 warp tiles) keep the tensor cores busier than 4 warps on 64x64
# ones: tc::gemm_ss from shared memory alone reaches ~600 vs ~500 TFLOP/s (benchmarks/mma_peak.py)
GEMM_CONFIGS = [dict(block_M=128, block_N=128, block_K=32, num_stages=3, threads=128),
                dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128),
                dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256),
                dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256),
                dict(block_M=128, block_N=128, block_K=32, num_stages=4, threads=256),
                dict(block_M=256, block_N=128, block_K=64, num_stages=3, threads=256),
                dict(block_M=128, block_N=256, block_K=32, num_stages=4, threads=256),
                dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256)]


WGMMA_CONFIGS = [dict(block_M=128, block_N=128, block_K=32, num_stages=3, threads=128),   # the README's
                 dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256),
                 dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)]


def _cfg_name(c):
    return f"{c['block_M']}x{c['block_N']}x{c['block_K']}/{c['num_stages']}/{c['threads']}"


def g_gemm(rows):
    import tilecraft.kernels as K
    sizes = pick([4096, 8192], [2048], [256])
    configs = pick(GEMM_CONFIGS, GEMM_CONFIGS[:2], GEMM_CONFIGS[:1])
    for dtype, td, short in (("float16", torch.float16, "fp16"), ("bfloat16", torch.bfloat16, "bf16")):
        for s in sizes:
            a, b = rand(s, s, dtype=td), rand(s, s, dtype=td)
            c = torch.empty(s, s, dtype=td, device=STATE["device"])
            ref_name, ref_fn = fastest_torch([("torch.matmul (cuBLAS)" if not on_cpu() else f"torch.matmul {short}",
                                               lambda a=a, b=b: torch.matmul(a, b))] + (
                [("torch.matmul fp32 + cast", lambda a=a, b=b, td=td: torch.matmul(a.float(), b.float()).to(td))]
                if on_cpu() else []))
            ref_out = torch.matmul(a.float(), b.float())  # the check's accurate reference (not timed)
            group = []
            for cfg in configs:
                def build(cfg=cfg, s=s, a=a, b=b, c=c, dtype=dtype):
                    k = K.matmul(s, s, s, dtype=dtype, **cfg)
                    c.fill_(float("nan"))
                    return (lambda: k(a, b, c)), c
                group.append(case(rows, f"gemm {short} {_cfg_name(cfg)}", f"{s}^3", build,
                                  lambda: (ref_fn, ref_out), 1e-2, flops=2 * s ** 3, ref_name=ref_name))
            if rungs_wanted():  # the rungs below the default Hopper path, side by side
                import tilecraft as tl
                rungs = {"mma.sync": {"tc.use_wgmma": False},
                         "wgmma-async": {"tc.use_tma": False},
                         "wgmma-tma": {"tc.warp_specialize": False},
                         "wgmma-ws": {"tc.warp_specialize": True}}
                for cfg, kind in [(c_, k_) for k_ in rungs for c_ in WGMMA_CONFIGS]:
                    def build(cfg=cfg, s=s, a=a, b=b, c=c, dtype=dtype, kind=kind):
                        k = tl.compile(K.matmul.fn(s, s, s, dtype=dtype, **cfg), out_idx=[-1],
                                       target={"kind": "cuda", "arch": "sm_90a"}, pass_configs=rungs[kind])
                        c.fill_(float("nan"))
                        return (lambda: k(a, b, c)), c
                    group.append(case(rows, f"gemm {short} {kind} {_cfg_name(cfg)}", f"{s}^3", build,
                                      lambda: (ref_fn, ref_out), 1e-2, flops=2 * s ** 3, ref_name=ref_name))
            timed = [r for r in group if r["ours_ms"] and r["check"].startswith("PASS")]
            if timed:
                min(timed, key=lambda r: r["ours_ms"])["note"] = "best"


def g_gemm_bias_gelu(rows):
    import tilecraft.kernels as K
    m, n, k_ = pick((8192, 8192, 2048), (2048, 2048, 1024), (256, 200, 128))
    a, b, bias = rand(m, k_), rand(k_, n), rand(n)
    c = torch.empty(m, n, dtype=torch.float16, device=STATE["device"])

    def ref_fn():
        return F.gelu(torch.addmm(bias, a, b), approximate="tanh")
    ref_out = F.gelu(torch.addmm(bias.float(), a.float(), b.float()), approximate="tanh")  # accurate, not timed
    ref_name, ref_fn = fastest_torch([("addmm fp16 + gelu", ref_fn)] + ([(
        "addmm fp32 + gelu + cast",
        lambda: F.gelu(torch.addmm(bias.float(), a.float(), b.float()), approximate="tanh").half())] if on_cpu() else []))
    for cfg in [GEMM_CONFIGS[i] for i in pick((0, 3, 4), (0,), (0,))]:
        def build(cfg=cfg):
            kern = K.matmul_bias_gelu(m, n, k_, **cfg)
            c.fill_(float("nan"))
            return (lambda: kern(a, b, bias, c)), c
        case(rows, f"gemm+bias+gelu fp16 {_cfg_name(cfg)}", f"{m}x{n}x{k_}", build,
             lambda: (ref_fn, ref_out), 1e-2, flops=2 * m * n * k_, ref_name=ref_name)
    if rungs_wanted():  # the default Hopper path's best tiles, and a rung below
        import tilecraft as tl
        fast = {"tl.enable_fast_math": True}   # as K.matmul_bias_gelu ships: tanh.approx (MUFU.TANH)
        rung_configs = {"": fast, "wgmma-async ": {"tc.use_tma": False, **fast}, "exact-math ": {}}
        for cfg, kind in [(c_, k_) for k_ in rung_configs for c_ in WGMMA_CONFIGS]:
            def build(cfg=cfg, kind=kind):
                kern = tl.compile(K.matmul_bias_gelu.fn(m, n, k_, **cfg), out_idx=[-1],
                                  target={"kind": "cuda", "arch": "sm_90a"}, pass_configs=rung_configs[kind])
                c.fill_(float("nan"))
                return (lambda: kern(a, b, bias, c)), c
            case(rows, f"gemm+bias+gelu fp16 {kind}{_cfg_name(cfg)}", f"{m}x{n}x{k_}", build,
                 lambda: (ref_fn, ref_out), 1e-2, flops=2 * m * n * k_, ref_name=ref_name)


# 128x128/3/256: alone on its SM, warp-specialized with the overlapped consumer loop (transform/overlap_gemms.py);
# 64x128/2/128: four times the blocks, for short sequences (D64 S1024 causal: 1.03-1.07x SDPA, 2026-11-30)
FA_CONFIGS = [dict(block_M=64, block_N=64, num_stages=1, threads=128),
              dict(block_M=128, block_N=128, num_stages=2, threads=256),
              dict(block_M=128, block_N=128, num_stages=3, threads=256),
              dict(block_M=64, block_N=128, num_stages=2, threads=128)]


def g_flash_attention(rows):
    import tilecraft.kernels as K
    shapes = pick([(4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (4, 8, 1024, 64, False),
                   (4, 8, 1024, 64, True)], [(1, 8, 1024, 128, False), (1, 8, 1024, 128, True)],
                  [(1, 2, 200, 64, False), (1, 2, 200, 64, True)])
    for b, h, s, d, causal in shapes:
        q, k, v = (rand(b, s, h, d) for _ in range(3))
        qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))  # SDPA layout, made up front
        ref_out = F.scaled_dot_product_attention(qt.float(), kt.float(), vt.float(),
                                                 is_causal=causal).transpose(1, 2)  # accurate, not timed
        o = torch.empty_like(q)
        flops = 4 * b * h * s * s * d // (2 if causal else 1)
        ref_name, ref_fn = fastest_torch(
            [("SDPA fp16", lambda qt=qt, kt=kt, vt=vt, c=causal: F.scaled_dot_product_attention(qt, kt, vt, is_causal=c))]
            + ([("SDPA fp32 + cast", lambda qt=qt, kt=kt, vt=vt, c=causal: F.scaled_dot_product_attention(
                qt.float(), kt.float(), vt.float(), is_causal=c).half())] if on_cpu() else []))
        configs = FA_CONFIGS[:1] if on_cpu() else FA_CONFIGS
        fast = {"tl.enable_fast_math": True}   # as K.flash_attention ships (ex2.approx, as FlashAttention builds)
        rungs = {"mma.sync ": {"tc.use_wgmma": False, **fast}, "ws ": {"tc.warp_specialize": True, **fast},
                 "exact-math ": {}}
        for cfg, wgmma in [(c_, "") for c_ in configs] + [(c_, r) for r in rungs for c_ in configs[:2] if rungs_wanted()]:
            def build(cfg=cfg, b=b, h=h, s=s, d=d, causal=causal, q=q, k=k, v=v, o=o, wgmma=wgmma):
                if wgmma:  # beside the default Hopper path: both gemms on mma.sync; warp-specialized; fast math
                    import tilecraft as tl
                    kern = tl.compile(K.flash_attention.fn(b, h, s, d, is_causal=causal, **cfg),
                                      target={"kind": "cuda", "arch": "sm_90a"}, pass_configs=rungs[wgmma])
                else:
                    kern = K.flash_attention(b, h, s, d, is_causal=causal, **cfg)
                o.fill_(float("nan"))
                return (lambda: kern(q, k, v, o)), o

            def ref(fn=ref_fn, ref_out=ref_out):
                return fn, ref_out
            case(rows, f"flash_attn fwd fp16 {'causal' if causal else 'full'} {wgmma}"
                       f"{cfg['block_M']}x{cfg['block_N']}/{cfg['num_stages']}/{cfg['threads']}",
                 f"B{b} H{h} S{s} D{d}", build, ref, 1e-2, flops=flops, ref_name=ref_name)


# issue 25's kernels (FlashAttention backward, FP8 GEMM, decode attention, grouped GEMM): bench_new_kernels.py
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_new_kernels  # noqa: E402

globals().update({f"g_{name}": fn for name, fn in bench_new_kernels.register(sys.modules[__name__]).items()})


COMPILE_CHILD = r"""
import json, sys, time, torch
torch.cuda.init()
import tilecraft, tilecraft.kernels as K
s = int(sys.argv[1])
if sys.argv[2:] == ["ws"]:   # the warp-specialized 128x256 GEMM, first compile of a fresh process
    func = K.matmul.get_tir(s, s, s, 128, 256, 64, 3, 256)
    t0 = time.perf_counter(); k = tilecraft.compile(func, out_idx=[-1], pass_configs={"tc.warp_specialize": True})
    print("RESULT" + json.dumps({"cold": time.perf_counter() - t0, "plan": k.get_plan()}))
    sys.exit(0)
t0 = time.perf_counter(); k = K.matmul(s, s, s); cold = time.perf_counter() - t0
func = K.matmul.get_tir(s, s, s)
hits = []
for _ in range(5):
    t0 = time.perf_counter(); tilecraft.compile(func, out_idx=[-1]); hits.append(time.perf_counter() - t0)
t0 = time.perf_counter(); K.matmul(s, s, s); mem = time.perf_counter() - t0
a = torch.randn(s, s, device="cuda", dtype=torch.float16); b = torch.randn_like(a)
torch.cuda.synchronize(); t0 = time.perf_counter(); k(a, b); torch.cuda.synchronize()
first = time.perf_counter() - t0
print("RESULT" + json.dumps({"cold": cold, "disk_hit": sorted(hits)[2], "mem_hit": mem, "first_call": first,
                             "from_cache": k.artifact.from_cache}))
"""


def _compile_child(s: int, *args) -> dict:
    """COMPILE_CHILD's result, run in a fresh process with an empty kernel cache."""
    with tempfile.TemporaryDirectory(prefix="tilecraft_bench_cache_") as cache:
        env = dict(os.environ, TILECRAFT_CACHE_DIR=cache, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("TILECRAFT_DISABLE_CACHE", None)
        env.pop("TILELANG_DISABLE_CACHE", None)
        proc = subprocess.run([sys.executable, "-c", COMPILE_CHILD, str(s), *args], capture_output=True, text=True,
                              env=env, timeout=300)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
        if proc.returncode or not line:
            raise RuntimeError((proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1])
        return json.loads(line[-1][6:])


def g_compile(rows):
    """Cold compiles: a fresh process and an empty kernel cache each.  Each child runs twice and the second
    is reported: the first process on a freshly started machine also reads torch, NVRTC and ptxas from disk
    (H200, s9: 999 / 631 ms first against 308 ms once the OS had them in memory)."""
    s = 4096
    try:
        first = _compile_child(s)
        res = _compile_child(s)
    except Exception as e:  # noqa: BLE001
        rows.append(row("compile gemm fp16 (cold)", f"{s}^3", check=f"ERROR {type(e).__name__}: {str(e)[:160]}"))
        return
    try:
        ws_first = _compile_child(s, "ws")
        ws = _compile_child(s, "ws")
        rows.append(row("compile warp-specialized gemm fp16 (cold)", f"{s}^3 128x256x64/3/256", check="-",
                        ours_ms=ws["cold"] * 1e3, note=f"goal <= 500 ms (issue 9); first process {ws_first['cold'] * 1e3:.0f} ms"
                        + ("" if "warp-specialized" in ws["plan"] else "; NOT warp-specialized: " + ws["plan"])))
    except Exception as e:  # noqa: BLE001
        rows.append(row("compile warp-specialized gemm fp16 (cold)", f"{s}^3",
                        check=f"ERROR {type(e).__name__}: {str(e)[:160]}"))
    size = f"{s}^3 128x128x32/3"
    rows.append(row("compile gemm fp16 (cold)", size, check="-", ours_ms=res["cold"] * 1e3,
                    note=f"goal <= 1000 ms; first process {first['cold'] * 1e3:.0f} ms"))
    rows.append(row("compile gemm fp16 (disk cache hit)", size, check="-", ours_ms=res["disk_hit"] * 1e3,
                    note="goal <= 10 ms"))
    rows.append(row("compile gemm fp16 (memory cache hit)", size, check="-", ours_ms=res["mem_hit"] * 1e3))
    rows.append(row("first call (module load + launch)", size, check="-", ours_ms=res["first_call"] * 1e3))
    _header_compile_rows(rows)


def _header_compile_rows(rows):
    """NVRTC's own time on the device headers (the goals tests/cuda once asserted): tilecraft.h with a
    tiny kernel, and the hand-written pipelined GEMM of tests/cuda/gemm_kernel.cu, sm_90a, NVRTC warm."""
    import time
    from tilecraft.compiler.nvrtc import compile_cuda_nvrtc
    tiny = ('#include <tilecraft/tilecraft.h>\n'
            'extern "C" __global__ void k(float* x) { x[threadIdx.x] = tc::exp(x[threadIdx.x]); }\n')
    try:
        compile_cuda_nvrtc(tiny, "sm_90a")  # warm: loads libnvrtc
        with open(os.path.join(ROOT, "tests", "cuda", "gemm_kernel.cu")) as f:
            gemm_src = f.read()
        for name, src in (("compile tilecraft.h + tiny kernel (NVRTC)", tiny),
                          ("compile pipelined gemm kernel (NVRTC)", gemm_src)):
            t0 = time.perf_counter()
            compile_cuda_nvrtc(src, "sm_90a")
            rows.append(row(name, "sm_90a", check="-", ours_ms=(time.perf_counter() - t0) * 1e3,
                            note="goal < 2000 ms on a loaded 2-core machine"))
    except Exception as e:  # noqa: BLE001
        rows.append(row("compile tilecraft.h (NVRTC)", "sm_90a", check=f"ERROR {type(e).__name__}: {str(e)[:160]}"))


_host_us = host_time_us  # one definition, in tilecraft.profiler


def _launch_variant(k, mode):
    """The same kernel object called the way TILECRAFT_LAUNCHER=`mode` would (python, capi)."""
    from tilecraft.runtime.fastpath import specialize
    other = type(k).__new__(type(k))
    other.__dict__.update(k.__dict__)
    old = os.environ.get("TILECRAFT_LAUNCHER")
    os.environ["TILECRAFT_LAUNCHER"] = mode
    try:
        cls = specialize(other)
    finally:
        if old is None:
            os.environ.pop("TILECRAFT_LAUNCHER", None)
        else:
            os.environ["TILECRAFT_LAUNCHER"] = old
    if cls is None:
        return None
    other.__class__ = cls
    return other


def g_launch(rows):
    """Host time per cached launch of the users' call (the compiled launcher: torch-aware build
    unless TILECRAFT_LAUNCHER says otherwise) beside torch.add, alternated in one run; the
    Python call and the Python.h-only launcher ("before") are timed beside them."""
    import tilecraft.kernels as K
    from tilecraft.runtime import claunch
    r = row("host time / cached launch", "1024 fp32, out alloc", ref_name="torch.add", unit="us")
    rows.append(r)
    try:
        claunch.wait()  # a first run on this machine builds the torch-aware launcher (~10 s, once)
        k = K.vector_add(1024)
        a, b = rand(1024, dtype=torch.float32), rand(1024, dtype=torch.float32)
        kind = type(k).launcher if hasattr(type(k), "launcher") else "general"
        if kind == "c":
            kind += " (torch-aware)" if claunch.module().native_build() else " (Python.h only)"
        r["size"] = f"1024 fp32 on {STATE['device']}, out alloc, launcher {kind}"
        err = rel_err(k(a, b), a + b)
        r["check"] = ("PASS" if err < 1e-6 else "FAIL") + f" {err:.1e}"
        calls = {"ours": k}
        for mode, label in (("python", "Python call"), ("capi", "Python.h-only launcher")):
            other = _launch_variant(k, mode)
            if other is not None and (mode == "python" or type(other).launcher == "c"):
                calls[label] = other
        bursts = 50 if STATE["quick"] else 200
        times = {name: [] for name in calls}
        ref = []
        for _ in range(3):  # in turn, best of each: host clocks drift over a run
            for name, fn in calls.items():
                times[name].append(_host_us(lambda fn=fn: fn(a, b), bursts))
            ref.append(_host_us(lambda: torch.add(a, b), bursts))
        ref = min(ref)
        ours = min(times.pop("ours"))
        r.update(ours_ms=ours / 1e3, ref_ms=ref / 1e3, speed=ours / ref, achieved=ours,
                 note="ours/ref = time ratio (goal <= 1)" + ("; SLOWER than torch.add" if ours > ref else ""))
        for name, ts in times.items():
            t = min(ts)
            rows.append(row(f"host time / cached launch, before: {name}", "1024 fp32, out alloc", check="-",
                            ref_name="torch.add", unit="us", ours_ms=t / 1e3, ref_ms=ref / 1e3, speed=t / ref,
                            achieved=t, note="the same kernel called this way, same run (TILECRAFT_LAUNCHER)"))
    except Exception as e:  # noqa: BLE001
        r["check"] = f"ERROR {type(e).__name__}: {str(e)[:160]}"


# ---- driver ----------------------------------------------------------------------------------
def _context_alive() -> bool:
    if on_cpu():
        return True
    try:
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1).item()
        return True
    except Exception:  # noqa: BLE001
        return False


def run_groups(groups, rows):
    from tilecraft.runtime import claunch
    from tilecraft.target import default_target
    t0 = time.perf_counter()
    claunch.wait()  # built once per machine, before any timing (the cold-compile child finds it on disk)
    print(f"[bench] launcher: {claunch.mode()}"
          + (f", torch-aware build {claunch.module().native_build()}" if claunch.module() else f" ({claunch.error()})")
          + f" ({time.perf_counter() - t0:.1f}s)", flush=True)
    with default_target("cpu" if on_cpu() else "auto"):   # library kernels follow --cpu
        _run_groups(groups, rows)


def _run_groups(groups, rows):
    for i, g in enumerate(groups):
        print(f"[bench] {g} ...", flush=True)
        t0 = time.perf_counter()
        n0 = len(rows)
        try:
            globals()[f"g_{g}"](rows)
        except Exception as e:  # noqa: BLE001
            rows.append(row(g, "", check=f"ERROR {type(e).__name__}: {str(e)[:160]}"))
        for r in rows[n0:]:
            print(f"[bench]   {r['kernel']:<44} {r['size']:<18} {r['check']}", flush=True)
        print(f"[bench] {g} done in {time.perf_counter() - t0:.1f}s", flush=True)
        rest = groups[i + 1:]
        if rest and not _context_alive():
            print(f"[bench] the CUDA context is unusable after {g}; running {rest} in a fresh process", flush=True)
            rows.extend(_child(rest))
            return


def _child(groups):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    cmd = [sys.executable, os.path.abspath(__file__), "--groups", ",".join(groups), "--rows-json", path,
           "--copy-tbps", str(STATE["copy_tbps"] or 0)] + (["--quick"] if STATE["quick"] else []) + (
               ["--cpu"] if on_cpu() else [])
    subprocess.run(cmd)
    try:
        with open(path) as f:
            return json.load(f)
    except Exception:  # noqa: BLE001
        return [row(g, "", check="ERROR the child process produced no results") for g in groups]
    finally:
        os.unlink(path)


def fmt(v, spec):
    return "" if v is None else format(v, spec)


def table(rows) -> str:
    head = ["kernel", "size", "check", "ours ms", "ref ms", "ours/ref", "achieved", "% ceil", "ref", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r["speed"] is not None and r["unit"] != "us" and r["speed"] < 1.0 and "SLOWER" not in r["note"]:
            r["note"] = (f"SLOWER: {r.get('ref_name', 'torch')} is {1 / r['speed']:.2f}x faster"
                         + (f"; {r['note']}" if r["note"] else ""))
        ach = f"{r['achieved']:.2f} {r['unit']}" if r["achieved"] is not None else ""
        cells = [r["kernel"], r["size"], r["check"], fmt(r["ours_ms"], ".4f"), fmt(r["ref_ms"], ".4f"),
                 fmt(r["speed"], ".2f") + (f" ({r['speed_range'][0]:.2f}-{r['speed_range'][1]:.2f})"
                                           if r.get("speed_range") and f"{r['speed_range'][0]:.2f}" != f"{r['speed_range'][1]:.2f}" else ""),
                 ach, fmt(r["pct"], ".0f"), r.get("ref_name", ""), r["note"]]
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def environment() -> dict:
    from tilecraft import env as tc_env
    from tilecraft.target import current_cuda_arch
    if on_cpu():
        import platform
        return {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "gpu": "cpu",
                "sm_count": os.cpu_count(), "arch": platform.machine(), "torch": torch.__version__, "cuda": None,
                "python": sys.version.split()[0], "compiler": tc_env.cxx(), "quick": STATE["quick"],
                "copy_tbps": None, "peak_tflops": None}
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "gpu": p.name,
            "sm_count": p.multi_processor_count, "arch": current_cuda_arch(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "python": sys.version.split()[0],
            "compiler": tc_env.cuda_compiler(),
            "quick": STATE["quick"], "copy_tbps": STATE["copy_tbps"], "peak_tflops": STATE["peak_tflops"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes and shorter timing (smoke run)")
    ap.add_argument("--only", default="", help=f"comma-separated groups: {','.join(GROUPS)}")
    ap.add_argument("--list", action="store_true", help="list the groups and exit")
    ap.add_argument("--groups", help=argparse.SUPPRESS)       # child mode
    ap.add_argument("--rows-json", help=argparse.SUPPRESS)
    ap.add_argument("--copy-tbps", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--cpu", action="store_true", help="time the CPU target even when a GPU is present")
    args = ap.parse_args(argv)
    if args.cpu or not torch.cuda.is_available():
        STATE["device"] = "cpu"
    all_groups = CPU_GROUPS if on_cpu() else GROUPS
    if args.list:
        print("\n".join(all_groups))
        return 0
    STATE["quick"] = args.quick
    if not on_cpu():
        name = torch.cuda.get_device_name()
        STATE["peak_tflops"] = next((v for k, v in DENSE_PEAK_TFLOPS.items() if k in name), None)
    if args.groups is not None:  # child: run, dump rows, no table
        STATE["copy_tbps"] = args.copy_tbps or None
        rows: list = []
        run_groups([g for g in args.groups.split(",") if g], rows)
        with open(args.rows_json, "w") as f:
            json.dump(rows, f)
        return 0
    groups = all_groups
    if args.only:
        wanted = [g.strip() for g in args.only.split(",") if g.strip()]
        bad = [g for g in wanted if g not in all_groups]
        if bad:
            ap.error(f"unknown group(s) {bad}; choose from {all_groups}")
        groups = [g for g in all_groups if g in wanted or (g == "copy" and not on_cpu())]
    rows: list = []
    t0 = time.perf_counter()
    run_groups(groups, rows)
    env = environment()
    env["seconds"] = round(time.perf_counter() - t0, 1)
    header = (f"tilecraft bench {env['date']} | {env['gpu']} ({env['arch']}, {env['sm_count']} "
              f"{'cores' if on_cpu() else 'SMs'}) | torch {env['torch']} CUDA {env['cuda']} | compiler {env['compiler']}"
              f"{' | QUICK' if args.quick else ''} | {env['seconds']} s")
    legend = ("ours/ref: speed ratio ref_ms/ours_ms against the torch reference named in 'ref', timed in this run "
              "(>1 = faster than it; SLOWER in 'note' otherwise), the median over rounds that time the two in turn "
              f"({1 if args.quick else ROUNDS} x {ROUND_MS} ms each; in brackets the lowest and highest round); "
              + ("" if on_cpu() else "% ceil: of the copy "
                 f"bandwidth measured here ({fmt(STATE['copy_tbps'], '.2f')} TB/s) or of the dense fp16/bf16 peak "
                 f"({STATE['peak_tflops']} TFLOP/s); ")
              + "check: relative Frobenius error vs an accurate fp32 reference (not timed).")
    text = f"{header}\n\n{table(rows)}\n\n{legend}\n"
    slower = [f"{r['kernel']} {r['size']} ({r['speed']:.2f}x {r.get('ref_name', 'torch')})" for r in rows
              if r["speed"] is not None and r["unit"] != "us" and r["speed"] < 1.0]
    launch = [r for r in rows if r["unit"] == "us" and r["speed"] is not None]
    if slower:
        text += "slower than torch in this run: " + "; ".join(slower) + "\n"
    for r in launch:
        text += (f"{r['kernel']}: {r['achieved']:.2f} us vs torch.add {r['ref_ms'] * 1e3:.2f} us = "
                 f"{r['speed']:.2f}x the time ({'SLOWER' if r['speed'] > 1 else 'at or below torch'})\n")
    # rounds that disagree: the machine's load (or clock) changed while the row was timed
    noisy = [f"{r['kernel']} {r['size']} ({r['speed_range'][0]:.2f}-{r['speed_range'][1]:.2f}x)" for r in rows
             if r.get("speed_range") and r["speed"] and (r["speed_range"][1] - r["speed_range"][0]) / r["speed"] > 0.25]
    if noisy:
        text += ("WARNING: the rounds of these rows disagree by more than 25% of the ratio (the load changed "
                 "while timing; rerun on a quiet machine before trusting them): " + "; ".join(noisy) + "\n")
    if on_cpu():
        from tilecraft.demo import load_note
        text += "\n".join(load_note("cpu")) + "\n"
    slug = re.sub(r"[^a-z0-9]+", "_", env["gpu"].lower()).strip("_")
    stem = f"{datetime.date.today().isoformat()}_{slug}{'_quick' if args.quick else ''}"
    outs = ([] if on_cpu() else [os.path.join(ROOT, "benchmarks", "results")]) + (
        [os.environ["OUT"]] if os.environ.get("OUT") else [])  # CPU runs (CI) leave the checkout alone
    for d in outs:
        try:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, stem + ".md"), "w") as f:
                f.write(text)
            with open(os.path.join(d, stem + ".json"), "w") as f:
                json.dump({"env": env, "rows": rows}, f, indent=1)
        except OSError as e:
            print(f"[bench] cannot write results to {d}: {e}")
    print("\n" + text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

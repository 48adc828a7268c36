"""The main job: compile, check and time the reference kernels on the default target (the GPU when
there is one, else the CPU), each beside what a torch user would run instead, in one table.

Two separate questions per kernel, never mixed:

- correct?  Our output against an accurate reference (fp32 math, `tilecraft.kernels.ref_*`):
  relative Frobenius error under a tolerance.  That reference is never timed.
- fast?  Our time against the fastest torch way to get the same result *on this target*
  (`torch.add`, `torch.matmul` = cuBLAS in fp16, fp16 `addmm` + `gelu`, `torch.softmax`,
  `torch.nn.functional.rms_norm`, `scaled_dot_product_attention`).  Where torch has several
  reasonable spellings (on the CPU, fp16 math may be slower than upcasting to fp32 and back),
  each is timed and the fastest one is the reference; the table names it.  The ratio is
  torch ms / our ms, and every row where we are slower says so in words.

A last line gives the host time of one cached launch (output allocated) beside torch.add's,
measured in the same run.  Sizes depend on the target: the CPU target is the reference
implementation, not a fast one, so it runs small ragged problems; the GPU the benchmark sizes.
"""
from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from . import kernels as K
from .profiler import do_bench
from .target import Target, default_target


def _rel(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _gelu_addmm(bias, a, b):
    return F.gelu(torch.addmm(bias, a, b), approximate="tanh")


def _rms_norm_torch():
    """torch's fused RMSNorm where it exists (torch >= 2.4), else its plain formula (named so)."""
    if hasattr(F, "rms_norm"):
        return "F.rms_norm", lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6)
    return "torch eager rms formula (no F.rms_norm)", lambda x, w: K.ref_rmsnorm(x, w)


def _cases(device: str):
    """(name, size, make kernel, args, accurate reference, torch candidates, bytes, flops, tol)."""
    big = device == "cuda"
    cpu = not big
    dt16 = torch.float16

    def rnd(*shape, dtype=torch.float32, scale=1.0):
        return torch.randn(*shape, device=device, dtype=torch.float32).mul_(scale).to(dtype)

    n = (1 << 26) if big else 1_000_003
    a, b = rnd(n), rnd(n)
    yield ("vector add fp32", f"{n}", lambda: K.vector_add(n), (a, b), lambda: a.double() + b.double(),
           [("torch.add", lambda: torch.add(a, b))], 3 * n * 4, None, 1e-6)

    M, N, Kd = (4096, 4096, 4096) if big else (300, 264, 200)
    A, B = rnd(M, Kd, dtype=dt16), rnd(Kd, N, dtype=dt16)
    cands = [("torch.matmul fp16" + (" (cuBLAS)" if big else ""), lambda: torch.matmul(A, B))]
    if cpu:
        cands.append(("torch.matmul fp32 + cast", lambda: torch.matmul(A.float(), B.float()).half()))
    yield ("GEMM fp16", f"{M}x{N}x{Kd}", lambda: K.matmul(M, N, Kd), (A, B), lambda: K.ref_matmul(A, B),
           cands, None, 2 * M * N * Kd, 1e-2)

    M2, N2, K2 = (8192, 8192, 2048) if big else (256, 200, 128)
    A2, B2 = rnd(M2, K2, dtype=dt16, scale=K2 ** -0.25), rnd(K2, N2, dtype=dt16, scale=K2 ** -0.25)
    bias = rnd(N2, dtype=dt16)
    cands = [("addmm fp16 + gelu", lambda: _gelu_addmm(bias, A2, B2))]
    if cpu:
        cands.append(("addmm fp32 + gelu + cast", lambda: _gelu_addmm(bias.float(), A2.float(), B2.float()).half()))
    yield ("GEMM+bias+GELU fp16", f"{M2}x{N2}x{K2}", lambda: K.matmul_bias_gelu(M2, N2, K2), (A2, B2, bias),
           lambda: K.ref_matmul_bias_gelu(A2, B2, bias), cands, None, 2 * M2 * N2 * K2, 2e-2)

    Ms, Ns = (16384, 1024) if big else (301, 1000)
    X = rnd(Ms, Ns, dtype=dt16, scale=3.0)
    cands = [("torch.softmax fp16", lambda: torch.softmax(X, -1))]
    if cpu:
        cands.append(("torch.softmax fp32 + cast", lambda: torch.softmax(X.float(), -1).half()))
    yield ("softmax fp16", f"{Ms}x{Ns}", lambda: K.softmax(Ms, Ns), (X,), lambda: K.ref_softmax(X), cands,
           2 * Ms * Ns * 2, None, 1e-2)

    Mr, Nr = (16384, 4096) if big else (301, 1024)
    Xr, Wr = rnd(Mr, Nr, dtype=torch.bfloat16), rnd(Nr, dtype=torch.bfloat16)
    label, rms = _rms_norm_torch()
    yield ("RMSNorm bf16", f"{Mr}x{Nr}", lambda: K.rmsnorm(Mr, Nr), (Xr, Wr), lambda: K.ref_rmsnorm(Xr, Wr),
           [(label, lambda: rms(Xr, Wr))], 2 * Mr * Nr * 2, None, 1e-2)

    B_, H, S, D = (4, 16, 4096, 128) if big else (1, 2, 200, 64)
    q, k, v = (rnd(B_, S, H, D, dtype=dt16) for _ in range(3))
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))  # SDPA's layout, made up front
    # Hopper: 128x128 tiles, two stages (K and V on rings of their own) take the warp-specialized overlapped
    # loop; measured 1.00x / 0.97x SDPA against 0.95x / 0.91x with three (results/2026-12-01_h200_s8_bench.md)
    hopper = big and torch.cuda.get_device_capability() == (9, 0)
    fa_cfg = (dict(block_M=128, block_N=128, num_stages=2, threads=256) if hopper else
              dict(block_M=128, block_N=64, threads=128) if big else dict(block_M=64, block_N=64, threads=128))
    for causal in (False, True):
        flops = 4 * B_ * H * S * S * D * (0.5 if causal else 1.0)
        tag = "causal" if causal else "full"
        cands = [("SDPA fp16", lambda c=causal: F.scaled_dot_product_attention(qt, kt, vt, is_causal=c))]
        if cpu:
            cands.append(("SDPA fp32 + cast", lambda c=causal: F.scaled_dot_product_attention(
                qt.float(), kt.float(), vt.float(), is_causal=c).half()))
        yield (f"FlashAttention fwd {tag}", f"B{B_} H{H} S{S} D{D}",
               (lambda c=causal: K.flash_attention(B_, H, S, D, is_causal=c, **fa_cfg)),
               (q, k, v), (lambda c=causal: K.ref_attention(q, k, v, c)), cands, None, flops, 2e-2)


def verdict(speed: float) -> str:
    """Plain words for torch ms / our ms."""
    if speed >= 1.0:
        return f"{speed:.2f}x faster"
    return f"SLOWER: {speed:.2f}x (torch {1 / speed:.2f}x faster)"


SPREAD_WARN = 0.25  # (p90 - p10) / median of one row's calls above this: the timing is not steady


def _time_spread(fn, device: str) -> tuple:
    """(median ms, spread) of fn's calls: spread = (90th - 10th percentile) / median."""
    cpu = device == "cpu"
    lo, med, hi = do_bench(fn, warmup=5 if cpu else 25, rep=20 if cpu else 100, quantiles=[0.1, 0.5, 0.9],
                           device=device)
    return med, (hi - lo) / med if med > 0 else 0.0


def _time(fn, device: str) -> float:
    return _time_spread(fn, device)[0]


def fastest(candidates, device: str) -> tuple:
    """(name, ms) of the fastest torch candidate, each timed in this run."""
    timed = [(name, _time(fn, device)) for name, fn in candidates]
    return min(timed, key=lambda t: t[1])


def load_note(device: str) -> list:
    """What the CPU target's times mean here, and the machine's load (empty on a GPU)."""
    if device != "cpu":
        return []
    import os
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    lines = ["CPU target: the reference semantics (each program as the GPU would run it, checked against "
             "torch); its times are this host's and compare the reference implementation with torch on "
             "this CPU, not what a GPU would do."]
    from .runtime.openmp import wait_policy
    lines.append(f"OpenMP wait policy of the kernels (and torch's operators): {wait_policy()}")
    if load is not None:
        busy = load > 0.75 * cores
        lines.append(f"machine load: {load:.1f} (1-minute average) on {cores} cores"
                     + (" -- LOADED: other processes take CPU time from both sides; times are inflated "
                        "and ratios noisy" if busy else ""))
    return lines


def host_launch_us(device: str) -> tuple:
    """Host µs per cached launch with the output allocated: (ours, torch.add), same run."""
    from .profiler.bench import host_time_us
    kern = K.vector_add(1024)
    a, b = (torch.randn(1024, device=device) for _ in range(2))
    kern(a, b)
    ours = min(host_time_us(lambda: kern(a, b)) for _ in range(2))
    ref = min(host_time_us(lambda: torch.add(a, b)) for _ in range(2))
    return ours, ref


HEADER = ("kernel", "size", "check vs fp32 ref", "compile s", "ours ms", "torch reference", "torch ms",
          "torch/ours", "rate")


def run(target: str = "auto", verbose: bool = True, only: list | None = None) -> list:
    """Run the demo; one dict per kernel (also printed as a table when `verbose`)."""
    tgt = Target.resolve(target)
    with default_target(tgt):   # the library kernels compile for the demo's target
        return _run(tgt, verbose, only)


def _run(tgt, verbose: bool, only: list | None) -> list:
    device = tgt.device_type
    torch.manual_seed(0)
    rows = []
    if verbose:
        print(f"tilecraft demo on {tgt} (torch {torch.__version__})", flush=True)
    for name, size, make, args, accurate, candidates, nbytes, flops, tol in _cases(device):
        if only and not any(o.lower() in name.lower() for o in only):
            continue
        row = {"kernel": name, "size": size, "check": "", "compile_s": None, "ms": None, "torch_ref": "",
               "torch_ms": None, "speed": None, "verdict": "", "rate": "", "spread": None}
        rows.append(row)
        t0 = time.perf_counter()
        try:
            kern = make()
            row["compile_s"] = time.perf_counter() - t0
            err = _rel(kern(*args), accurate())
            ok = err < tol and math.isfinite(err)
            row["check"] = f"{'PASS' if ok else 'FAIL'} {err:.1e}"
            row["ms"], row["spread"] = _time_spread(lambda: kern(*args), device)
            row["torch_ref"], row["torch_ms"] = fastest(candidates, device)
            row["speed"] = row["torch_ms"] / row["ms"]
            row["verdict"] = verdict(row["speed"])
            scale, unit = (1e9, "T") if device == "cuda" else (1e6, "G")
            row["rate"] = (f"{nbytes / row['ms'] / scale:.2f} {unit}B/s" if nbytes
                           else f"{flops / row['ms'] / scale:.1f} {unit}FLOP/s")
        except Exception as e:  # noqa: BLE001 - the demo reports every failure and goes on
            row["check"] = f"ERROR {type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
        if verbose:
            print(f"  {name:<28} {row['check']}", flush=True)
    launch = None
    if not only or any("launch" in o.lower() for o in only):
        try:
            launch = host_launch_us(device)
        except Exception as e:  # noqa: BLE001
            launch = e
    if verbose:
        print(format_table(rows, launch, device))
    return rows


def _fmt(v, spec) -> str:
    return "" if v is None else format(v, spec)


def format_table(rows, launch, device: str) -> str:
    cells = [[r["kernel"], r["size"], r["check"], _fmt(r["compile_s"], ".2f"), _fmt(r["ms"], ".3f"),
              r["torch_ref"], _fmt(r["torch_ms"], ".3f"), r["verdict"], r["rate"]] for r in rows]
    widths = [max(len(str(c[i])) for c in cells + [list(HEADER)]) for i in range(len(HEADER))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(HEADER, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in cells]
    lines.append("check: relative error against an fp32 reference (not timed). torch/ours: the fastest torch "
                 "reference above, timed in this run, over our time (> 1: we are faster).")
    slower = [f"{r['kernel']} ({r['speed']:.2f}x {r['torch_ref']})" for r in rows
              if r["speed"] is not None and r["speed"] < 1.0]
    if slower:
        lines.append("slower than torch here: " + "; ".join(slower))
    noisy = [f"{r['kernel']} ({r['spread']:.0%})" for r in rows
             if r.get("spread") is not None and r["spread"] > SPREAD_WARN]
    if noisy:
        lines.append(f"WARNING: large spread between runs (10th-90th percentile over the median above "
                     f"{SPREAD_WARN:.0%}): " + "; ".join(noisy) + " -- the load changed while timing; "
                     f"rerun on a quiet machine before trusting these ratios")
    lines += load_note(device)
    if isinstance(launch, tuple):
        ours, ref = launch
        word = "at or below torch's" if ours <= ref else "SLOWER than torch's"
        lines.append(f"host time per cached launch (vector add 1024 on {device}, output allocated): "
                     f"{ours:.2f} us vs torch.add {ref:.2f} us in this run = {ours / ref:.2f}x ({word})")
    elif launch is not None:
        lines.append(f"host time per cached launch: ERROR {type(launch).__name__}: {launch}")
    return "\n".join(lines)


def main(argv=None) -> int:
    rows = run()
    return 0 if all(r["check"].startswith("PASS") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

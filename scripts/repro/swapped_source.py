"""What the hand-written kernel probes (gemm_*_probe.py) share: compile a tilecraft program for sm_90a
with its CUDA source swapped for a hand-written one (same parameters and tensor maps), patch the
launch, and print one checked-and-timed markdown row beside the torch reference."""
from __future__ import annotations

import os
import sys

os.environ.setdefault("TILECRAFT_DISABLE_CACHE", "1")  # the callback's output is not in the cache key

import torch  # noqa: E402

import tilecraft as tl  # noqa: E402
from tilecraft.engine import callback  # noqa: E402
from tilecraft.profiler.bench import do_bench  # noqa: E402

SM90 = {"kind": "cuda", "arch": "sm_90a"}


def num_sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def compile_swapped(fn, source=None, pass_configs=None, *, grid=None, block=None, smem=None):
    """`fn` compiled as tilecraft compiles it, its CUDA source replaced by `source` (None: as generated),
    then launched with `grid` / `block` / `smem` where given."""
    if source is not None:
        callback.register_cuda_postproc_callback(lambda code, target: source)
    try:
        kern = tl.compile(fn, out_idx=[-1], target=SM90, pass_configs=pass_configs)
    finally:
        callback._CUDA_POSTPROC.clear()
    for name, value in (("_grid", grid), ("block", block), ("smem", smem)):
        if value is not None:
            setattr(kern._launch, name, value)
    return kern


def report(problem, form, build, args, ref, torch_fn, torch_ms=None):
    """Build, check against `ref` (fp32), time beside `torch_fn` (CUDA events, median) and print the row;
    `torch_ms`: an earlier reference time to take the faster of."""
    try:
        kern = build()
        c = kern(*args)
        torch.cuda.synchronize()
        err = ((c.float() - ref).norm() / ref.norm()).item()
        t = do_bench(lambda: kern(*args), return_mode="median")
        tr = do_bench(torch_fn, return_mode="median")
        tr = tr if torch_ms is None else min(tr, torch_ms)
        print(f"| {problem} | {form} | {err:.1e} | {t:.4f} | {tr:.4f} | {tr / t:.3f} |", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"| {problem} | {form} | {type(e).__name__}: {str(e)[:400]} | | | |", flush=True)


def race(rows, rounds=7, rep=40):
    """Like `report` for several rows at once, with the timing interleaved: every row and its torch
    reference are timed once per round, round after round, so clock drift (the H200 slows as it warms)
    falls on all rows alike.  `rows`: (problem, form, build, args, ref, torch_fn).  Prints each row with
    the median of its per-round speed ratios and their range."""
    import statistics
    built = []
    for problem, form, build, args, ref, torch_fn in rows:
        try:
            kern = build()
            c = kern(*args)
            torch.cuda.synchronize()
            err = ((c.float() - ref).norm() / ref.norm()).item()
            built.append((problem, form, kern, args, torch_fn, err, [], []))
        except Exception as e:  # noqa: BLE001
            print(f"| {problem} | {form} | {type(e).__name__}: {str(e)[:400]} | | | | |", flush=True)
    for _ in range(rounds):
        for _p, _f, kern, args, torch_fn, _e, ours, theirs in built:
            ours.append(do_bench(lambda: kern(*args), rep=rep, return_mode="median"))
            theirs.append(do_bench(torch_fn, rep=rep, return_mode="median"))
    for problem, form, _k, _a, _t, err, ours, theirs in built:
        ratios = sorted(t / o for o, t in zip(ours, theirs))
        print(f"| {problem} | {form} | {err:.1e} | {statistics.median(ours):.4f} | {statistics.median(theirs):.4f} "
              f"| {statistics.median(ratios):.3f} | {ratios[0]:.3f}-{ratios[-1]:.3f} |", flush=True)


def generated_source(fn, pass_configs=None) -> str:
    """The CUDA source tilecraft generates for `fn` on sm_90a (seen through the post-processing callback)."""
    captured = {}
    callback.register_cuda_postproc_callback(lambda code, target: captured.setdefault("src", code))
    try:
        compile_swapped(fn, None, pass_configs)
    finally:
        callback._CUDA_POSTPROC.clear()
    return captured["src"]


def gemm_problems():
    """(label, m, n, k, a, b, fp32 reference) for the sizes given as MxNxK arguments (default 4096^3 and
    8192^3), fresh operands each (fp16, or PROBE_DTYPE, e.g. bfloat16); prints the race table's header first."""
    dtype = getattr(torch, os.environ.get("PROBE_DTYPE", "float16"))
    sizes = [tuple(int(v) for v in arg.split("x")) for arg in sys.argv[1:]] or [(4096,) * 3, (8192,) * 3]
    print("| size | form | rel. error | ours ms | cuBLAS ms | ours/cuBLAS speed (median) | range over rounds |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for m, n, k in sizes:
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        yield f"{m}x{n}x{k}{'' if dtype == torch.float16 else ' ' + str(dtype).split('.')[-1]}", m, n, k, a, b, a.float() @ b.float()

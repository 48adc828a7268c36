"""The README GEMM (128x128x32, 3 stages, 128 threads) on sm_90a with and without tc.widen_k_tiles,
beside cuBLAS in the same run (CUDA events, median; ref, ours, ref, ours, each side the mean of its two
medians, as benchmarks/bench.py times).  Checked against an fp32 product first.
    python scripts/repro/widen_probe.py   ->  a markdown table on stdout"""
from __future__ import annotations

import torch

import tilecraft as tl
from tilecraft.kernels.gemm import matmul
from tilecraft.profiler.bench import do_bench


def timed(fn):
    return do_bench(fn, warmup=25, rep=100, return_mode="median", flush_l2="clean")


def main():
    torch.manual_seed(0)
    print("| size | dtype | k-tiles | rel. error | ours ms | cuBLAS ms | ours/cuBLAS |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for s in (4096, 8192):
        for dtype in ("float16", "bfloat16"):
            a = torch.randn(s, s, device="cuda", dtype=getattr(torch, dtype))
            b = torch.randn(s, s, device="cuda", dtype=getattr(torch, dtype))
            ref = a.float() @ b.float()
            for widen in (True, False):
                k = tl.compile(matmul.get_tir(s, s, s, dtype=dtype), out_idx=[-1],
                               pass_configs={"tc.widen_k_tiles": widen})
                err = ((k(a, b).float() - ref).norm() / ref.norm()).item()
                ours, theirs = [], []
                for _ in range(2):
                    theirs.append(timed(lambda: torch.matmul(a, b)))
                    ours.append(timed(lambda: k(a, b)))
                t, tr = sum(ours) / 2, sum(theirs) / 2
                print(f"| {s}^3 | {dtype} | {'64 (widened)' if widen else '32 (as written)'} | {err:.1e} | "
                      f"{t:.4f} | {tr:.4f} | {tr / t:.3f} |", flush=True)


if __name__ == "__main__":
    main()

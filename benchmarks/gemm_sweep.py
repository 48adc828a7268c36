"""Sweep mma.sync GEMM tile configs at 4096^3 (fp16) against cuBLAS, side by side, best last.

    PYTHONPATH=. python3 benchmarks/gemm_sweep.py [--wgmma]
"""
from __future__ import annotations

import itertools
import sys
from concurrent.futures import ThreadPoolExecutor

import torch

import tilecraft
import tilecraft.kernels as K
from tilecraft.profiler import do_bench

N = 4096


def configs():
    for (bm, bn, th), bk, st in itertools.product([(128, 128, 128), (128, 128, 256), (128, 256, 256), (256, 128, 256)],
                                                  (32, 64), (2, 3, 4)):
        if (bm * bk + bk * bn) * 2 * st <= 227 * 1024:
            yield dict(block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th)


def main():
    pc = {"tc.use_wgmma": True} if "--wgmma" in sys.argv else None
    cfgs = list(configs())

    def build(c):
        try:
            return tilecraft.compile(K.matmul.__wrapped__(N, N, N, **c), out_idx=[-1], target="cuda", pass_configs=pc)
        except Exception as e:  # noqa: BLE001
            return e
    with ThreadPoolExecutor(8) as ex:
        kernels = list(ex.map(build, cfgs))
    a = torch.randn(N, N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, N, device="cuda", dtype=torch.float16)
    ref = (a.float() @ b.float())
    rows = []
    for c, k in zip(cfgs, kernels):
        name = f"{c['block_M']}x{c['block_N']}x{c['block_K']}/{c['num_stages']}/{c['threads']}"
        if isinstance(k, Exception):
            print(f"{name:<20} ERROR {str(k).splitlines()[0][:100]}")
            continue
        out = k(a, b)
        err = ((out.float() - ref).norm() / ref.norm()).item()
        ms_ref = do_bench(lambda: a @ b, return_mode="median")
        ms = do_bench(lambda: k(a, b), return_mode="median")
        rows.append((ms_ref / ms, name, 2 * N**3 / ms / 1e9, err))
        print(f"{name:<20} {2 * N**3 / ms / 1e9:6.0f} TFLOP/s  {ms_ref / ms:.3f}x cuBLAS  err {err:.1e}", flush=True)
    print("--- best ---")
    for r in sorted(rows)[-5:]:
        print(f"{r[1]:<20} {r[2]:6.0f} TFLOP/s  {r[0]:.3f}x cuBLAS")


if __name__ == "__main__":
    main()

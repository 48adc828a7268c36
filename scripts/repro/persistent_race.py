"""Probe (issue 9): tilecraft's own GEMMs with and without the persistent tile walk
(`tc.persistent_tiles`, transform/persistent_tiles.py), each against torch, timed interleaved
(swapped_source.race: rounds of ours and torch in turn, median of the per-round ratios).
    python scripts/repro/persistent_race.py   ->  a markdown table on stdout"""
from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from swapped_source import compile_swapped, race  # noqa: E402

from tilecraft.kernels.gemm import matmul, matmul_bias_gelu  # noqa: E402

BIG = (128, 256, 64, 3, 256)
FORMS = (("launched per tile", {"tc.persistent_tiles": False}), ("persistent walk", {"tc.persistent_tiles": True}))


def main():
    torch.manual_seed(0)
    print("| problem | form | rel. error | ours ms | torch ms | ours/torch speed (median) | range over rounds |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    rows = []
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (4096, 4096, 2048)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float()
        fn = matmul.get_tir(m, n, k, *BIG)
        for form, cfg in FORMS:
            rows.append((f"gemm {m}x{n}x{k}", form, lambda fn=fn, cfg=cfg: compile_swapped(fn, None, cfg), (a, b), ref,
                         lambda a=a, b=b: torch.matmul(a, b)))
    m, n, k = 8192, 8192, 2048
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    bias = torch.randn(n, device="cuda", dtype=torch.float16)
    x = a.float() @ b.float() + bias.float()
    ref = F.gelu(x, approximate="tanh")
    fn = matmul_bias_gelu.get_tir(m, n, k, *BIG)
    for form, cfg in FORMS:
        rows.append((f"gemm+bias+gelu {m}x{n}x{k}", form,
                     lambda cfg=cfg: compile_swapped(fn, None, {"tl.enable_fast_math": True, **cfg}), (a, b, bias), ref,
                     lambda: F.gelu(torch.addmm(bias, a, b), approximate="tanh")))
    race(rows)


if __name__ == "__main__":
    main()

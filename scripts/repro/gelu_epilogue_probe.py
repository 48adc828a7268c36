"""Probe (issue 9): where does GEMM + bias + GELU 8192x8192x2048 lose its time against addmm + gelu?

Decomposes the shipped kernel (K.matmul_bias_gelu 128x256x64/3/256, fast math, sm_90a) by swapping
the one line of its epilogue that evaluates GELU:
  as generated      0.5 x (1 + tanh(z))                one MUFU.TANH per element (fast math)
  sigmoid form      x / (1 + __expf(-2z))              two MUFU ops (ex2, rcp) per element (the s8 kernel)
  bias only         x                                  no GELU at all (checked against addmm)
and without the kernel's panel rasterization (T.use_swizzle: bx, by straight from blockIdx),
and the plain GEMM of the same shape (tilecraft's and cuBLAS's), addmm alone and gelu alone,
so the epilogue's share is visible.  The ping-pong probe's kernel (epilogue under the other warpgroup's
main loop) is timed with both GELU forms too.  Every row is checked against torch on fresh random
inputs and timed beside it (CUDA events, median).
    python scripts/repro/gelu_epilogue_probe.py   ->  a markdown table on stdout"""
from __future__ import annotations

import os
import re
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm_pingpong_probe as pingpong  # noqa: E402
from swapped_source import compile_swapped, generated_source, num_sms, race  # noqa: E402

from tilecraft.kernels.gemm import matmul, matmul_bias_gelu  # noqa: E402
from tilecraft.profiler.bench import do_bench  # noqa: E402

M, N, K = 8192, 8192, 2048
# launched one block per tile, as this decomposition was measured (scripts/repro/persistent_race.py has the walk)
FAST = {"tl.enable_fast_math": True, "tc.persistent_tiles": False}
TANH = "(0.5f * x * (1.0f + tc::fast_tanh(0.7978845608028654f * (x + 0.044715f * x * x * x))))"
SIGMOID = "(x / (1.0f + __expf(-1.5957691216057308f * (x + 0.044715f * x * x * x))))"
GELU_LINE = re.compile(r"(const float x = .*;\n\s*C_local\[.*?\] = ).*;$", re.M)
RASTER = re.compile(r"  const int tc_panel = 10;\n(?:  const int tc_.*\n)*  const int by = .*\n  const int bx = .*\n")


def main():
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    bias = torch.randn(N, device="cuda", dtype=torch.float16)
    x = a.float() @ b.float() + bias.float()
    ref = x * torch.sigmoid(1.5957691216057308 * (x + 0.044715 * x ** 3))
    fused = lambda: F.gelu(torch.addmm(bias, a, b), approximate="tanh")  # noqa: E731
    y = torch.addmm(bias, a, b)
    for name, fn in (("torch.mm", lambda: torch.mm(a, b)), ("torch.addmm", lambda: torch.addmm(bias, a, b)),
                     ("gelu(tanh) alone", lambda: F.gelu(y, approximate="tanh")), ("addmm + gelu", fused)):
        print(f"- {name}: {do_bench(fn, return_mode='median'):.4f} ms")
    print()
    print("| problem | form | rel. error | ours ms | torch ms | ours/torch speed (median) | range over rounds |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    gen = generated_source(matmul_bias_gelu.get_tir(M, N, K, 128, 256, 64, 3, 256), FAST)
    assert len(GELU_LINE.findall(gen)) == 1 and len(RASTER.findall(gen)) == 1, "the generated kernel changed shape"
    unraster = RASTER.sub("  const int bx = blockIdx.x;\n  const int by = blockIdx.y;\n", gen)
    fn = matmul_bias_gelu.get_tir(M, N, K, 128, 256, 64, 3, 256)
    name = f"gemm+bias+gelu {M}x{N}x{K}"
    pp = pingpong.source(M, N, K, True)
    body = re.compile(r"return __fdividef\(x, .*?;\n", re.S)
    assert len(body.findall(pp)) == 1
    launch = dict(grid=(num_sms(), 1, 1), block=(384, 1, 1), smem=pingpong.SMEM)
    plain = matmul.get_tir(M, N, K, 128, 256, 64, 3, 256)
    gelu_args = (a, b, bias)
    race([
        (name, "as generated (tanh.approx)", lambda: compile_swapped(fn, gen, FAST), gelu_args, ref, fused),
        (name, "sigmoid form (ex2 + rcp)", lambda: compile_swapped(fn, GELU_LINE.sub(rf"\g<1>{SIGMOID};", gen), FAST),
         gelu_args, ref, fused),
        (name, "as generated, no rasterization", lambda: compile_swapped(fn, unraster, FAST), gelu_args, ref, fused),
        (f"gemm+bias {M}x{N}x{K}", "bias only (no GELU)",
         lambda: compile_swapped(fn, GELU_LINE.sub(r"\g<1>x;", gen), FAST), gelu_args, x, lambda: torch.addmm(bias, a, b)),
        (f"gemm {M}x{N}x{K}", "tilecraft 128x256x64/3/256", lambda: compile_swapped(plain), (a, b),
         a.float() @ b.float(), lambda: torch.mm(a, b)),
        (name, "as generated, 128x256x64/4/256", lambda: compile_swapped(
            matmul_bias_gelu.get_tir(M, N, K, 128, 256, 64, 4, 256), None, FAST), gelu_args, ref, fused),
        (name, "as generated, 256x128x64/3/256", lambda: compile_swapped(
            matmul_bias_gelu.get_tir(M, N, K, 256, 128, 64, 3, 256), None, FAST), gelu_args, ref, fused),
        (name, "ping-pong (ex2 + rcp)", lambda: compile_swapped(fn, pp, FAST, **launch), gelu_args, ref, fused),
        (name, "ping-pong tanh.approx", lambda: compile_swapped(fn, body.sub(f"return {TANH};\n", pp), FAST, **launch),
         gelu_args, ref, fused),
    ], rounds=9)


if __name__ == "__main__":
    main()

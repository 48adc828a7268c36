"""The main job: compile, check against torch, and time the reference kernels on the default
target (the GPU when there is one, else the CPU), printing one table.

Sizes depend on the target: the CPU target is the reference implementation, not a fast one, so it
runs small but ragged problems; the GPU runs the benchmark-sized ones.
"""
from __future__ import annotations

import math
import time

import torch

from . import kernels as K
from .profiler import do_bench
from .target import Target


def _rel(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _cases(device: str):
    big = device == "cuda"
    dt16 = torch.float16

    def rnd(*shape, dtype=torch.float32, scale=1.0):
        return torch.randn(*shape, device=device, dtype=torch.float32).mul_(scale).to(dtype)

    n = (1 << 26) if big else 1_000_003
    a, b = rnd(n), rnd(n)
    yield ("vector add fp32", f"{n}", lambda: K.vector_add(n), (a, b), lambda: a + b, 3 * n * 4, None, 1e-6)

    M, N, Kd = (4096, 4096, 4096) if big else (300, 264, 200)
    A, B = rnd(M, Kd, dtype=dt16), rnd(Kd, N, dtype=dt16)
    yield ("GEMM fp16", f"{M}x{N}x{Kd}", lambda: K.matmul(M, N, Kd), (A, B), lambda: A @ B if big else
           (A.float() @ B.float()).half(), None, 2 * M * N * Kd, 1e-2)

    M2, N2, K2 = (8192, 8192, 2048) if big else (256, 200, 128)
    A2, B2 = rnd(M2, K2, dtype=dt16, scale=K2 ** -0.25), rnd(K2, N2, dtype=dt16, scale=K2 ** -0.25)
    bias = rnd(N2, dtype=dt16)
    yield ("GEMM+bias+GELU fp16", f"{M2}x{N2}x{K2}", lambda: K.matmul_bias_gelu(M2, N2, K2), (A2, B2, bias),
           lambda: K.ref_matmul_bias_gelu(A2, B2, bias), None, 2 * M2 * N2 * K2, 2e-2)

    Ms, Ns = (16384, 1024) if big else (301, 1000)
    X = rnd(Ms, Ns, dtype=dt16, scale=3.0)
    yield ("softmax fp16", f"{Ms}x{Ns}", lambda: K.softmax(Ms, Ns), (X,), lambda: torch.softmax(X, -1) if big
           else K.ref_softmax(X), 2 * Ms * Ns * 2, None, 1e-2)

    B_, H, S, D = (4, 16, 4096, 128) if big else (1, 2, 200, 64)
    q, k, v = (rnd(B_, S, H, D, dtype=dt16) for _ in range(3))
    for causal in (False, True):
        flops = 4 * B_ * H * S * S * D * (0.5 if causal else 1.0)
        tag = "causal" if causal else "full"
        yield (f"FlashAttention fwd {tag}", f"B{B_} H{H} S{S} D{D}",
               (lambda c=causal: K.flash_attention(B_, H, S, D, is_causal=c, block_M=128 if big else 64,
                                                   block_N=64 if big else 64, threads=128)),
               (q, k, v), (lambda c=causal: K.ref_attention(q, k, v, c)), None, flops, 2e-2)


def run(target: str = "auto", verbose: bool = True) -> list:
    tgt = Target.resolve(target)
    device = tgt.device_type
    torch.manual_seed(0)
    rows = []
    if verbose:
        print(f"tilecraft demo on {tgt} (torch {torch.__version__})", flush=True)
    for name, size, make, args, ref, nbytes, flops, tol in _cases(device):
        t0 = time.perf_counter()
        try:
            kern = make()
            compile_s = time.perf_counter() - t0
            out = kern(*args)
            expect = ref()
            err = _rel(out, expect)
            ok = err < tol and math.isfinite(err)
            ms = do_bench(lambda: kern(*args), warmup=5 if device == "cpu" else 25,
                          rep=20 if device == "cpu" else 100, return_mode="median")
            ref_ms = do_bench(ref, warmup=5 if device == "cpu" else 25, rep=20 if device == "cpu" else 100,
                              return_mode="median")
            scale, unit = (1e9, "T") if device == "cuda" else (1e6, "G")
            rate = (f"{nbytes / ms / scale:.2f} {unit}B/s" if nbytes else f"{flops / ms / scale:.1f} {unit}FLOP/s")
            rows.append((name, size, "PASS" if ok else "FAIL", f"{err:.1e}", f"{compile_s:.2f}",
                         f"{ms:.3f}", f"{ref_ms:.3f}", f"{ref_ms / ms:.2f}", rate))
        except Exception as e:  # noqa: BLE001 - the demo reports every failure and goes on
            rows.append((name, size, "ERROR", type(e).__name__, "", "", "", "", str(e).splitlines()[0][:60]))
        if verbose:
            print(f"  {rows[-1][0]:<28} {rows[-1][2]}", flush=True)
    header = ("kernel", "size", "check", "rel err", "compile s", "ms", "torch ms", "speedup", "rate")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    print("\n".join(lines))
    return rows


def main(argv=None) -> int:
    rows = run()
    return 0 if all(r[2] == "PASS" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

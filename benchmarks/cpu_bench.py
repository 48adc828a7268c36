"""The CPU target against torch on the CPU, in one run (issue 22's goals), with the machine's load.

    python3 benchmarks/cpu_bench.py [--only gemm,fa] [--threads 1,2] [--out benchmarks/results] [--load-test]

Rows: GEMM fp32 512^3 / 1024^3 (vs torch.matmul), fp16 / bf16 inputs (vs torch's fastest CPU way
to the same fp16 / bf16 result: the 16-bit matmul or the fp32 upcast), vector add 16M fp32,
softmax fp16, RMSNorm bf16, FlashAttention forward B1 H8 S1024 D64 fp16 (vs SDPA, 16-bit or fp32
upcast), each with 1 and with 2 threads (torch.set_num_threads and our kernels' thread count).
Every row checks our output against torch first; then ours and torch are timed in alternation
(ROUNDS rounds of a few calls each, the median per call of each side), so a change of load hits
both.  "spread" is (max - min) / median of our rounds: above 25 % the row is marked, the load
was changing under it.

--load-test: the 1M-element add alone and under two busy-loop processes (the goal: the loaded
median within 2x of the unloaded one), with 2 threads.
"""
from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROUNDS = 7


def timed(fn, min_s=0.05):
    """Seconds per call of fn over one round of at least min_s (at least one call)."""
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        t = time.perf_counter() - t0
        if t >= min_s:
            return t / n


def race(ours, theirs):
    """(median ours, median theirs, spread of ours) over ROUNDS alternating rounds."""
    ours(), theirs()  # warm
    a, b = [], []
    for _ in range(ROUNDS):
        a.append(timed(ours))
        b.append(timed(theirs))
    med = statistics.median(a)
    return med, statistics.median(b), (max(a) - min(a)) / med


def fastest(cands):
    """(name, fn) of the fastest torch candidate (a quick median of 3 each)."""
    best = None
    for name, fn in cands:
        fn()
        t = statistics.median(timed(fn, 0.02) for _ in range(3))
        if best is None or t < best[0]:
            best = (t, name, fn)
    return best[1], best[2]


def set_threads(kernels, n):
    torch.set_num_threads(n)
    try:
        from tilecraft.runtime.openmp import configure
    except ImportError:  # a checkout from before kernels took torch's thread count: OpenMP's own
        os.environ["OMP_NUM_THREADS"] = str(n)
        return
    for k in kernels:
        configure(k._launch.lib)


def cases(only, dtypes=("float32", "float16", "bfloat16"), sizes=(512, 1024)):
    """(group, name, size, flops or None, build) where build() -> (kernel, ours, candidates, check)."""
    import tilecraft.kernels as K
    from tilecraft.kernels.attention import flash_attention
    out = []
    for n in sizes:
        for dt in dtypes:
            tdt = getattr(torch, dt)

            def build(n=n, dt=dt, tdt=tdt):
                k = K.matmul(n, n, n, dtype=dt)
                a, b = torch.randn(n, n).to(tdt), torch.randn(n, n).to(tdt)
                c = torch.empty(n, n, dtype=tdt)
                cands = [("torch.matmul", lambda: torch.matmul(a, b))]
                if dt != "float32":
                    cands.append(("fp32 matmul + cast", lambda: torch.matmul(a.float(), b.float()).to(tdt)))
                check = lambda: torch.testing.assert_close(k(a, b).float(), (a.float() @ b.float()),  # noqa: E731
                                                           rtol=1e-2, atol=1e-2 * n ** 0.5)
                return k, (lambda: k(a, b)), cands, check
            out.append(("gemm", f"gemm {dt}", f"{n}^3", 2 * n ** 3, build))

    def add():
        n = 1 << 24
        k = K.vector_add(n)
        a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
        def check():
            k(a, b, c)
            torch.testing.assert_close(c, a + b)
        return k, (lambda: k(a, b, c)), [("torch.add", lambda: torch.add(a, b))], check
    out.append(("elementwise", "vector_add fp32", "16M", None, add))

    def softmax():
        m, n = 4096, 1024
        k = K.softmax(m, n)
        x = (torch.randn(m, n) * 3).half()
        cands = [("torch.softmax fp16", lambda: torch.softmax(x, -1)),
                 ("torch.softmax fp32 + cast", lambda: torch.softmax(x.float(), -1).half())]
        return k, (lambda: k(x)), cands, (lambda: torch.testing.assert_close(k(x).float(), torch.softmax(x.float(), -1),
                                                                              rtol=1e-2, atol=1e-3))
    out.append(("softmax", "softmax fp16", "4096x1024", None, softmax))

    def rmsnorm():
        m, n = 4096, 1024
        k = K.rmsnorm(m, n)
        x, w = torch.randn(m, n).bfloat16(), torch.randn(n).bfloat16()
        cands = [("F.rms_norm bf16", lambda: F.rms_norm(x, (n,), w, 1e-6)),
                 ("F.rms_norm fp32 + cast", lambda: F.rms_norm(x.float(), (n,), w.float(), 1e-6).bfloat16())]
        return k, (lambda: k(x, w)), cands, (lambda: torch.testing.assert_close(
            k(x, w).float(), K.ref_rmsnorm(x, w).float(), rtol=2e-2, atol=2e-2))
    out.append(("rmsnorm", "rmsnorm bf16", "4096x1024", None, rmsnorm))

    def fa():
        b, h, s, d = 1, 8, 1024, 64
        k = flash_attention(b, h, s, d)
        q, kk, v = (torch.randn(b, s, h, d).half() for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, kk, v))
        cands = [("SDPA fp16", lambda: F.scaled_dot_product_attention(qt, kt, vt)),
                 ("SDPA fp32 + cast", lambda: F.scaled_dot_product_attention(qt.float(), kt.float(), vt.float()).half())]
        ref = F.scaled_dot_product_attention(qt.float(), kt.float(), vt.float()).transpose(1, 2)
        return k, (lambda: k(q, kk, v)), cands, (lambda: torch.testing.assert_close(k(q, kk, v).float(), ref,
                                                                                     rtol=1e-2, atol=1e-2))
    out.append(("fa", "flash_attention fwd fp16", "B1 H8 S1024 D64", 4 * 8 * 1024 * 1024 * 64, fa))
    return [c for c in out if not only or c[0] in only]


def busy():
    while True:
        pass


def load_test():
    import tilecraft.kernels as K
    from tilecraft.target import default_target
    n = 1 << 20
    with default_target("cpu"):
        k = K.vector_add(n)
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
    set_threads([k], 2)

    def med():
        k(a, b, c)
        ts = []
        for _ in range(200):
            t = time.perf_counter()
            k(a, b, c)
            ts.append(time.perf_counter() - t)
        return statistics.median(ts), min(ts)
    alone = med()
    procs = [multiprocessing.Process(target=busy, daemon=True) for _ in range(2)]
    for p in procs:
        p.start()
    time.sleep(0.5)
    try:
        loaded = med()
    finally:
        for p in procs:
            p.terminate()
            p.join()
    ratio = loaded[0] / alone[0]
    return (f"| vector_add fp32 1M, 2 threads | {alone[0] * 1e3:.3f} ms (min {alone[1] * 1e3:.3f}) "
            f"| {loaded[0] * 1e3:.3f} ms (min {loaded[1] * 1e3:.3f}) | {ratio:.2f}x | "
            f"{'ok' if ratio <= 2 else 'above the 2x goal'} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="groups: gemm, elementwise, softmax, rmsnorm, fa")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--out", default=None, help="also write the table to OUT/<date>_cpu_bench.md")
    ap.add_argument("--load-test", action="store_true")
    ap.add_argument("--dtypes", default="float32,float16,bfloat16", help="the GEMM rows' input types")
    ap.add_argument("--sizes", default="512,1024", help="the GEMM rows' n (n^3)")
    args = ap.parse_args()
    from tilecraft.target import default_target
    only = set(filter(None, args.only.split(",")))
    threads = [int(t) for t in args.threads.split(",")]
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    load0 = os.getloadavg()
    lines = []
    with default_target("cpu"):
        built = [(g, name, size, flops, *b()) for g, name, size, flops, b in
                 cases(only, args.dtypes.split(","), [int(n) for n in args.sizes.split(",")])]
    for g, name, size, flops, k, ours, cands, check in built:
        check()
        for t in threads:
            set_threads([k], t)
            ref_name, ref = fastest(cands)
            mo, mr, spread = race(ours, ref)
            rate = f"{flops / mo / 1e9:.1f} GFLOP/s" if flops else ""
            mark = " (spread!)" if spread > 0.25 else ""
            lines.append(f"| {name} | {size} | {t} | {mo * 1e3:.2f} | {mr * 1e3:.2f} | {ref_name} | "
                         f"**{mr / mo:.2f}x** | {rate} | {spread:.0%}{mark} |")
            print(lines[-1], flush=True)
    load1 = os.getloadavg()
    head = [f"# CPU target vs torch on the CPU ({datetime.datetime.now():%Y-%m-%d %H:%M}, commit {commit})", "",
            f"{os.cpu_count()} cores ({_cpu_name()}), torch {torch.__version__}; load average "
            f"{load0[0]:.1f} at the start, {load1[0]:.1f} at the end.  The CPU target is the reference "
            f"semantics; its times here are the host's, and on a loaded machine both sides slow down "
            f"(ratios are ours and torch's timed in alternation, medians of {ROUNDS} rounds).", "",
            "| kernel | size | threads | ours (ms) | torch (ms) | torch way | ratio torch/ours | ours | spread |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    table = head + lines
    if args.load_test:
        table += ["", "| under load | alone: median | under 2 busy loops: median | ratio | goal <= 2x |",
                  "| --- | --- | --- | --- | --- |", load_test()]
    text = "\n".join(table) + "\n"
    print("\n" + text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, f"{datetime.date.today()}_cpu_bench.md")
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote {path}")


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    main()

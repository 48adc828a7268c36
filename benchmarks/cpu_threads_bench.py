"""The CPU target's thread-level mode (one fiber per CUDA thread, tilecraft_cpu_threads.h): time per
block and per fiber switch, with the machine's load.

    python3 benchmarks/cpu_threads_bench.py [--blocks 64] [--threads 128,256,1024]

Rows, one OpenMP thread (the per-block cost; blocks run in parallel like the tile path's):
- warp scan: 10 shuffles (a shfl_up ladder per warp, a shfl_down reduction in the first warp), one
  block barrier, shared memory (tests/cpu/test_cpu_threads.py's warp_scan): milliseconds per block;
- barrier loop / shuffle loop: 1000 __syncthreads / T.shfl_xor in a loop: nanoseconds per thread
  per barrier (two fiber switches: to the block's scheduler and back).
Each row checks its result against torch first; the minimum of 5 runs is printed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "cpu"))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

import tilecraft as tilelang  # noqa: E402
import tilecraft.language as T  # noqa: E402


def _best(fn, runs=5):
    fn()
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def loop_program(threads, reps, shuffle):
    @T.prim_func
    def main(X: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            v = T.alloc_var("float32")
            v = X[tx]
            for i in T.serial(reps):
                if shuffle:
                    v = T.shfl_xor(v, 1)
                else:
                    T.sync_threads()
            X[tx] = v
    return main


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=64)
    ap.add_argument("--threads", default="128,256,1024")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from test_threads import warp_scan
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}")
    print("| row | threads/block | time |")
    print("| --- | --- | --- |")
    for threads in (int(t) for t in args.threads.split(",")):
        n = threads * args.blocks
        k = warp_scan(n, threads)
        x = torch.randn(n)
        y, s = k(x)
        torch.testing.assert_close(y, x.view(-1, 32).cumsum(1).view(-1), rtol=1e-5, atol=1e-4)
        print(f"| warp scan + block sum | {threads} | {_best(lambda: k(x)) / args.blocks * 1e3:.3f} ms per block |")
        for shuffle in (False, True):
            reps = 1000
            kern = tilelang.compile(loop_program(threads, reps, shuffle), target="cpu")
            v = torch.randn(threads)
            w = v.clone()
            kern(w)   # an even number of xor-1 shuffles: each lane ends with its own value
            torch.testing.assert_close(w, v)
            what = "shfl_xor loop" if shuffle else "__syncthreads loop"
            print(f"| {what} | {threads} | {_best(lambda: kern(v)) / (threads * reps) * 1e9:.1f} ns per thread and step |")


if __name__ == "__main__":
    main()

"""Cold compile time of the reference kernels on the CPU target (median of N, fresh kernel cache).

    python3 benchmarks/cpu_compile.py [--reps 5] [--root CHECKOUT]

Each rep runs in a fresh process with an empty kernel cache (a new TILECRAFT_CACHE_DIR), so the
time is the whole `kernel = factory(...)` of a user's first call: parse, lower, generate C++,
compile and link, store.  The precompiled header (compiler/cxx.py) is built once beforehand and
shared by the reps, as it is across every kernel of a machine; its own one-time cost is printed
apart.  Wall time, the C++ compiler's CPU time (children's user+sys) and the Python side's CPU
time are reported with the load average (one small kernel is built first in each process, so the
Python modules of the CPU pipeline are imported before the clock starts): on a shared machine the wall time mostly measures the
other processes, and the CPU times say what an unloaded machine's wall time would be.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KERNELS = {
    "gemm fp16 512^3 (kernels.matmul)": "from tilecraft.kernels.gemm import matmul as f; f(512, 512, 512)",
    "flash_attention B1 H8 S1024 D64": "from tilecraft.kernels.attention import flash_attention as f; f(1, 8, 1024, 64)",
    # the bf16 x bf16 gemm's header (tilecraft_cpu_gemm_bf16.h) is parsed by such programs only
    "gemm bf16 512^3 (kernels.matmul)": "from tilecraft.kernels.gemm import matmul as f; f(512, 512, 512, dtype='bfloat16')",
}

CHILD = """
import os, resource, sys, time, json
import torch  # imported by a kernel's first call anyway: not part of the compile
import tilecraft
from tilecraft.target import default_target
from tilecraft.kernels.elementwise import vector_add
with default_target("cpu"):  # imports the CPU pipeline's modules (with PYTHONDONTWRITEBYTECODE, compiles them)
    vector_add(4096)
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
t1, c1 = time.perf_counter(), time.process_time()
with default_target("cpu"):
    exec(sys.argv[1])
t2, c2 = time.perf_counter(), time.process_time()
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": t2 - t1, "py_cpu": c2 - c1,
                  "cxx_cpu": r.ru_utime + r.ru_stime - r0.ru_utime - r0.ru_stime}))
"""


def one(stmt: str, cache: str) -> dict:
    env = dict(os.environ, TILECRAFT_CACHE_DIR=cache, PYTHONPATH=ROOT)  # --root: another checkout
    out = subprocess.run([sys.executable, "-c", CHILD, stmt], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    global ROOT
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--root", default=ROOT, help="the checkout to measure (default: this one)")
    args = ap.parse_args()
    ROOT = os.path.abspath(args.root)
    base = tempfile.mkdtemp(prefix="tc-compile-bench-")
    try:
        warm = os.path.join(base, "warm")
        t = time.perf_counter()
        first = one("from tilecraft.kernels.elementwise import vector_add as f; f(1024)", warm)
        print(f"first kernel ever (builds the precompiled header): {time.perf_counter() - t:.2f} s wall, "
              f"compiler {first['cxx_cpu']:.2f} CPU-s")
        rows = []
        for name, stmt in KERNELS.items():
            walls, cpus, pys = [], [], []
            for r in range(args.reps):
                cache = os.path.join(base, f"{len(rows)}_{r}")
                os.makedirs(cache)
                if os.path.isdir(os.path.join(warm, "cxx-pch")):
                    shutil.copytree(os.path.join(warm, "cxx-pch"), os.path.join(cache, "cxx-pch"))
                res = one(stmt, cache)
                walls.append(res["wall"])
                cpus.append(res["cxx_cpu"])
                pys.append(res["py_cpu"])
            rows.append((name, statistics.median(walls), min(walls), statistics.median(cpus), statistics.median(pys)))
        load = os.getloadavg()
        print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
        print("| kernel | cold compile, median wall (s) | min wall (s) | C++ compiler CPU (s) | Python CPU (s) |")
        print("| --- | --- | --- | --- | --- |")
        for name, med, lo, cpu, py in rows:
            print(f"| {name} | {med:.2f} | {lo:.2f} | {cpu:.2f} | {py:.2f} |")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Issue-24 acceptance run: a 16-config tune of the README GEMM on the CPU target through a local
Ray cluster, against the local executor; the compile phase with 1 Ray worker and with 2.

    python benchmarks/ray_tune_scaling.py [--size 256] [--out benchmarks/results/DATE_cpu_ray_tune_scaling]

Each run starts with no compiled kernel in the cache (the precompiled C++ header, made once per
compiler, is built before the clock starts) and with the tuning database off, so every config is
compiled and benchmarked. Ray's workers are started and have imported tilecraft before the clock
starts (one no-op task per CPU): the compile phase measures compiling, not Python start-up. The
Ray runs alternate (1 worker, 2 workers) for --rounds rounds; the ratio uses each one's fastest
compile phase (load from other jobs only ever adds time). The machine's load average is recorded
beside the numbers (a shared machine: other jobs' load shows).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

SPACE = {"block_M": [32, 64], "block_N": [32, 64], "block_K": [32, 64], "num_stages": [1, 2]}


def _warm(ray, n: int) -> None:
    @ray.remote(num_cpus=1)
    def warm() -> int:
        import tilecraft  # noqa: F401
        from tilecraft.compiler.cache import compiler_version_hash
        compiler_version_hash()
        time.sleep(1.0)  # hold the CPU so the n tasks land on n distinct workers
        return os.getpid()

    pids = ray.get([warm.remote() for _ in range(n)])
    assert len(set(pids)) == n, pids


def _tune(executor, size: int, configs: list[dict]):
    import torch

    from tilecraft.autotuner import AutoTuner
    from tilecraft.kernels.gemm import matmul

    from tilecraft.compiler.cache import clear_cache
    clear_cache("kernels")  # cold: no kernel compiled yet (the header's .gch stays)
    t0 = time.perf_counter()
    result = (AutoTuner.from_kernel(matmul, configs).set_kernel_parameters((size, size, size), {})
              .set_profile_args(ref_prog=lambda a, b: (a.float() @ b.float()).to(torch.float16), warmup=10, rep=60)
              .run(executor=executor))
    return result, time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=2)
    stamp = datetime.date.today().isoformat()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                      f"{stamp}_cpu_ray_tune_scaling"))
    args = parser.parse_args()
    os.environ["TILECRAFT_AUTO_TUNING_DISABLE_CACHE"] = "1"
    os.environ["TILECRAFT_AUTO_TUNING_MAX_CPU_COUNT"] = "2"
    os.environ["TILECRAFT_CACHE_DIR"] = tempfile.mkdtemp(prefix="tc-ray-scaling-")
    from tilecraft import env
    from tilecraft.compiler.cxx import pch_dir
    pch_dir(env.cxx())  # the precompiled header, once, before any clock

    import ray

    from tilecraft.autotuner.ray_executor import RayExecutor
    from tilecraft.autotuner.sweep import expand_space

    configs = expand_space(SPACE)
    assert len(configs) == 16
    runs = {}
    rounds: dict[str, list[float]] = {}
    load = {"start": os.getloadavg()}

    result, wall = _tune("local", args.size, configs)
    runs["local"] = (result, wall)
    load["after local"] = os.getloadavg()
    bests: dict[str, list[dict]] = {"local": [result.config]}
    for workers in [1, 2] * args.rounds:
        for attempt in range(3):  # Ray gives its raylet 30 s to start: a loaded machine may need another go
            try:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
                break
            except Exception:  # noqa: BLE001 - "The current node timed out during startup"
                ray.shutdown()
                if attempt == 2:
                    raise
        _warm(ray, workers)
        result, wall = _tune(RayExecutor(), args.size, configs)
        ray.shutdown()
        name = f"ray{workers}"
        rounds.setdefault(name, []).append(result.phase_seconds["compile"])
        bests.setdefault(name, []).append(result.config)
        if name not in runs or result.phase_seconds["compile"] < runs[name][0].phase_seconds["compile"]:
            runs[name] = (result, wall)
        load[f"after ray {workers} (round {len(rounds[name])})"] = os.getloadavg()

    ratio = runs["ray1"][0].phase_seconds["compile"] / runs["ray2"][0].phase_seconds["compile"]
    same_best = all(c == runs["local"][0].config for c in bests["ray2"])
    lines = [f"# 16-config tune of the README GEMM ({args.size}^3, fp16, CPU target): local executor vs a local "
             "Ray cluster", "",
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, `python benchmarks/ray_tune_scaling.py "
             f"--size {args.size}`; cold compile cache per run, tuning database off; Ray workers warmed "
             "(tilecraft imported) before the clock starts.", "",
             f"Machine: {os.cpu_count()} cores, shared with other jobs: load average (1, 5, 15 min) "
             + "; ".join(f"{k}: {tuple(round(x, 1) for x in v)}" for k, v in load.items()) + ".", "",
             "| executor | compile phase (s) | benchmark phase (s) | runoff (s) | whole tune (s) | best config | best (ms) |",
             "|---|---|---|---|---|---|---|"]
    for name, (result, wall) in runs.items():
        ph = result.phase_seconds
        lines.append(f"| {name} | {ph.get('compile', 0):.1f} | {ph.get('benchmark', 0):.1f} | {ph.get('runoff', 0):.1f} | {wall:.1f} | "
                     f"{result.config} | {result.latency:.4f} |")
    lines += ["", "Compile phase per round (s): " + "; ".join(f"{k}: {', '.join(f'{x:.1f}' for x in v)}"
                                                      for k, v in rounds.items()) + " (the table shows each one's fastest round).",
              "", f"Compile phase, 1 Ray worker / 2 Ray workers: **{ratio:.2f}x** (goal >= 1.6x).",
              f"Best config, Ray (2 workers, every round) vs local executor: {'the same' if same_best else 'DIFFERENT'} "
              f"({bests['ray2']} vs {runs['local'][0].config}).",
              "Best config of every run: " + "; ".join(f"{k}: {v}" for k, v in bests.items()) + ".", "",
              "Per-config latencies (ms, the CPU policy's 5% quantile after the runoff; `*` the chosen config, "
              "`~` within the noise of the fastest: the runoff's rounds cannot tell it from a tie), local | ray1 | ray2:", ""]
    for i, c in enumerate(configs):
        cells = []
        for name in ("local", "ray1", "ray2"):
            r = runs[name][0].all_results[i]
            mark = ("*" if r.config == runs[name][0].config else "") + ("~" if r.within_noise else "")
            cells.append(f"{r.latency:.4f}{mark}" if r.ok else r.status)
        lines.append(f"- #{i} {c}: " + " | ".join(cells))
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out + ".md", "w") as f:
        f.write(text)
    with open(args.out + ".json", "w") as f:
        json.dump({"size": args.size, "load": load, "compile_rounds": rounds, "bests": bests, "compile_ratio_1_over_2": ratio, "same_best": same_best,
                   "runs": {name: {"phase_seconds": r.phase_seconds, "wall": w, "best": r.config,
                                   "latency": r.latency,
                                   "results": [x.to_json() for x in r.all_results]}
                            for name, (r, w) in runs.items()}}, f, indent=1, default=repr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

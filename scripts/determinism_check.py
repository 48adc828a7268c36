"""Does the compiler generate the same source in every process?  Lowers fuzzed programs for the CPU,
sm_80, sm_90a and sm_90a warp-specialized in two Python processes with different string hashing
(PYTHONHASHSEED) and lists every (program, target) whose source differs: an order taken from a set or
a dict of names makes the same program compile differently from one run to the next (a session-30
case: a reduction's butterfly order, i.e. its rounding order).

    .venv/bin/python scripts/determinism_check.py [--count 400] [--seed 7] [--hash-seeds 1,2]

Only the passes and printers run (nothing is compiled), ~10 s a process for 400 programs here.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def lower_all(count: int, seed: int, workdir: str) -> dict:
    """{"<program> <target>": sha256 of its source, or of its error}"""
    sys.path.insert(0, ROOT)
    from tilecraft.target import Target
    from tilecraft.testing.fuzz_build import CUDA_VARIANTS, lower
    from tilecraft.testing.fuzz_run import Program
    targets = [("cpu", Target.resolve("cpu"), {})] + [
        (name, Target.resolve({"kind": "cuda", "arch": arch}), cfg) for name, arch, cfg in CUDA_VARIANTS]
    out = {}
    for i in range(count):
        p = Program(seed, i, workdir)
        if p.func is None:
            continue
        for name, target, cfg in targets:
            try:
                text = lower(p.func, target, cfg)
            except Exception as e:  # noqa: BLE001 - a refusal is compared like a source
                text = f"error: {type(e).__name__}: {e}"
            out[f"{p.name} {name}"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--hash-seeds", default="1,2")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        json.dump(lower_all(args.count, args.seed, args.child), sys.stdout)
        return 0
    runs = []
    with tempfile.TemporaryDirectory() as wd:   # one folder: the programs' paths are in their sources
        for hs in args.hash_seeds.split(","):
            env = dict(os.environ, PYTHONHASHSEED=hs)
            r = subprocess.run([sys.executable, __file__, "--child", wd, "--count", str(args.count),
                                "--seed", str(args.seed)], env=env, capture_output=True, text=True, check=True)
            runs.append((hs, json.loads(r.stdout)))
    (h0, first), differ = runs[0], []
    for hs, other in runs[1:]:
        differ += [f"{key}: PYTHONHASHSEED={h0} {first.get(key)} vs {hs} {other.get(key)}"
                   for key in sorted(set(first) | set(other)) if first.get(key) != other.get(key)]
    print(f"{len(first)} lowerings (fuzz seed {args.seed}, {args.count} programs) under PYTHONHASHSEED "
          f"{args.hash_seeds}: {len(differ)} differ")
    for line in differ:
        print("  " + line)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

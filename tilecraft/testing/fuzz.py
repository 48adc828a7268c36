"""The differential fuzzer: random tile programs, each checked against a torch expression of the
same computation on the CPU target, compiled for the CUDA paths, and (on a GPU) run on them.

    python -m tilecraft.testing.fuzz --count 500 --target cpu [--seed 7]
    python -m tilecraft.testing.fuzz --count 2000 --target cuda --seed 1 --table benchmarks/results/fuzz.md

Targets: ``cpu`` runs every program on the CPU target and compiles it for every CUDA variant
(fuzz_build.CUDA_VARIANTS: sm_80, sm_90a (the Hopper defaults), sm_90a warp-specialized, sm_90a with mbarriers;
NVRTC, no GPU); ``cpu-only`` skips the CUDA compiles; ``cuda`` also runs each program on the
local GPU under every variant its arch allows and compares it with torch and with the CPU.

Program i of seed S is `fz_S_i`, generated from its own random stream: `--seed S --only i`
reproduces it alone.  A failing program is shrunk (fuzz_shrink) and saved under
`tests/fuzz_regressions/` (`--save-dir`), where tests/fuzz_regressions/test_regressions.py runs
it on every target from then on.  A program a target refuses with a clear TilecraftError is
counted as refused (a known gap, never a wrong answer); a wrong answer, a crash, an internal
error or code that does not compile is a failure.  Exit status 1 on any failure; the last line
says how many programs were compared.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

from .fuzz_build import CUDA_VARIANTS, build_cpu, compile_cuda_batch
from .fuzz_gen import random_spec, render
from .fuzz_run import expected_of, inputs_of, load_module, run_and_compare


class Program:
    def __init__(self, seed: int, index: int, workdir: str, spec: dict | None = None):
        self.seed, self.index = seed, index
        self.spec = spec or random_spec(random.Random(f"{seed}:{index}"), f"fz_{seed}_{index}")
        self.name = self.spec["name"]
        self.path = os.path.join(workdir, f"{self.name}.py")
        with open(self.path, "w") as f:
            f.write(render(self.spec))
        self.mod = self.func = None
        self.error = ""
        try:
            self.mod = load_module(self.path)
            self.func = self.mod.FZ_FUNC
        except Exception as e:  # noqa: BLE001 - a valid program the parser rejects is a finding
            self.error = f"parse: {type(e).__name__}: {str(e)[:500]}"

    @property
    def data_seed(self) -> int:
        return self.seed * 100003 + self.index


class Report:
    """Counts per target (compared / refused / failed) and the failures themselves."""

    def __init__(self):
        self.rows: dict = {}
        self.failures: list = []
        self.refusals: dict = {}

    def add(self, target: str, prog: Program, failed: str = "", refused: str = ""):
        row = self.rows.setdefault(target, {"compared": 0, "refused": 0, "failed": 0})
        if failed:
            row["failed"] += 1
            self.failures.append((target, prog, failed))
        elif refused:
            row["refused"] += 1
            self.refusals.setdefault((target, refused[:100]), []).append(prog.name)
        else:
            row["compared"] += 1

    def table(self) -> str:
        lines = ["| target | passed | refused (clear error) | failed |", "| --- | --- | --- | --- |"]
        for t, r in self.rows.items():
            lines.append(f"| {t} | {r['compared']} | {r['refused']} | {r['failed']} |")
        return "\n".join(lines)


def check_programs(progs: list, target: str, report: Report, workdir: str, gpu_variants=()) -> None:
    """Run / compile `progs` on the CPU (always), the CUDA variants (compile-only unless
    `target == "cuda"`), recording every outcome in `report`."""
    ok = [p for p in progs if p.func is not None]
    for p in progs:
        if p.func is None:
            report.add("parse", p, failed=p.error)
    cpu = build_cpu([(p.name, p.func) for p in ok], workdir)
    cpu_results = {}
    for p in ok:
        out = cpu[p.name]
        if out.kernel is None:
            report.add("cpu", p, failed=out.failed, refused=out.refused)
            continue
        inputs = inputs_of(p.mod, p.data_seed)
        want = expected_of(p.mod, inputs)
        bad = run_and_compare(out.kernel, p.mod, p.data_seed, expected=want)
        report.add("cpu", p, failed=bad and f"CPU vs torch: {bad}")
        if not bad:
            cpu_results[p.name] = out.kernel
    if target == "cpu-only":
        return
    if target != "cuda":
        for variant in CUDA_VARIANTS:
            some = [p for p in ok if not variant[2] or p.spec["kind"] == "gemm"]  # configs change GEMM loops only
            res = compile_cuda_batch([(p.name, p.func) for p in some], variant)
            for p in some:
                r = res[p.name]
                report.add(f"compile {variant[0]}", p, failed=r.failed, refused=r.refused)
        return
    for variant in gpu_variants:
        some = [p for p in ok if not variant[2] or p.spec["kind"] == "gemm"]  # configs change GEMM loops only
        built = compile_cuda_batch([(p.name, p.func) for p in some], variant, kernels=True)
        for p in some:
            out = built[p.name]
            if out.kernel is None:
                report.add(f"gpu {variant[0]}", p, failed=out.failed, refused=out.refused)
                continue
            bad = run_and_compare(out.kernel, p.mod, p.data_seed, device="cuda")
            if not bad and p.name in cpu_results:
                # the CPU's own output as the reference: the two lowerings must agree too
                inputs = [t.clone() for t in inputs_of(p.mod, p.data_seed)]
                cpu_results[p.name](*inputs)
                bad = run_and_compare(out.kernel, p.mod, p.data_seed, device="cuda",
                                      expected=dict(enumerate(inputs)))
                bad = bad and f"GPU vs CPU: {bad}"
            else:
                bad = bad and f"GPU vs torch: {bad}"
            report.add(f"gpu {variant[0]}", p, failed=bad)


def gpu_variants() -> tuple:
    """The CUDA variants the local GPU can run: the sm_80 code path everywhere from sm_80 on
    (compiled for the GPU's own plain arch: sm_80 machine code does not load on a newer GPU, and
    without the `a` features the compiler takes the sm_80 path), sm_90a only on 9.0."""
    import torch
    major, minor = torch.cuda.get_device_capability()
    own = f"sm_{major}{minor}"
    return tuple((name, own if arch == "sm_80" else arch, cfg) for name, arch, cfg in CUDA_VARIANTS
                 if arch == "sm_80" or (major, minor) == (9, 0))


def fuzz(count: int, seed: int, target: str, only=None, save_dir=None, shrink=True, workdir=None,
         out=sys.stdout, chunk: int = 96, shrink_tries: int = 150) -> Report:
    """Generate and check `count` programs of `seed`; returns the report (failures shrunk and
    saved under `save_dir` when given)."""
    workdir = workdir or tempfile.mkdtemp(prefix=f"tilecraft-fuzz-{seed}-")
    report = Report()
    variants = gpu_variants() if target == "cuda" else ()
    indices = list(only) if only is not None else list(range(count))
    t0 = time.perf_counter()
    for c in range(0, len(indices), chunk):
        progs = [Program(seed, i, workdir) for i in indices[c:c + chunk]]
        check_programs(progs, target, report, workdir, variants)
        print(f"[fuzz] seed {seed}: {min(c + chunk, len(indices))}/{len(indices)} programs, "
              f"{len(report.failures)} failure(s), {time.perf_counter() - t0:.0f} s", file=out, flush=True)
    if report.failures and shrink:
        from .fuzz_shrink import shrink_and_save
        seen = set()
        for tgt, prog, why in report.failures:
            if prog.name in seen:
                continue
            seen.add(prog.name)
            path = shrink_and_save(prog, tgt, why, workdir, save_dir, out=out, max_tries=shrink_tries)
            print(f"[fuzz] {prog.name} on {tgt}: {why.splitlines()[0][:300]}\n[fuzz]   minimal program: {path}",
                  file=out)
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tilecraft.testing.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--target", choices=("cpu", "cpu-only", "cuda"), default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", type=int, nargs="*", help="check only these program indices of the seed")
    ap.add_argument("--save-dir", default=None,
                    help="where minimal failing programs go (default: tests/fuzz_regressions of this checkout)")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--shrink-tries", type=int, default=150, help="candidate programs the shrinker may try per failure")
    ap.add_argument("--table", default=None, help="also write the results table (markdown) to this file")
    args = ap.parse_args(argv)
    save_dir = args.save_dir or _default_save_dir()
    t0 = time.perf_counter()
    report = fuzz(args.count, args.seed, args.target, only=args.only, save_dir=save_dir, shrink=not args.no_shrink,
                  shrink_tries=args.shrink_tries)
    seconds = time.perf_counter() - t0
    for (tgt, why), names in sorted(report.refusals.items()):
        print(f"[fuzz] refused on {tgt} ({len(names)}x, e.g. {names[0]}): {why}")
    table = report.table()
    print(table)
    n = len(args.only) if args.only is not None else args.count
    summary = (f"compared {n} programs (seed {args.seed}, target {args.target}) in {seconds:.0f} s: "
               f"{len(report.failures)} failure(s)")
    if args.table:
        with open(args.table, "w") as f:
            f.write(f"# fuzz run: seed {args.seed}, {n} programs, target {args.target}\n\n{table}\n\n{summary}\n")
    print(summary)
    return 1 if report.failures else 0


def _default_save_dir() -> str:
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(here, "tests", "fuzz_regressions")


if __name__ == "__main__":
    sys.exit(main())

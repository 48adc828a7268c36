"""The differential fuzzer: random tile programs, each checked against a torch expression of the
same computation on the CPU target, compiled for the CUDA paths, and (on a GPU) run on them.

    python -m tilecraft.testing.fuzz --count 500 --target cpu [--seed 7]
    python -m tilecraft.testing.fuzz --count 10000 --target cuda --jobs 16 --table benchmarks/results/fuzz.md
    python -m tilecraft.testing.fuzz --mutate --count 2000 --table benchmarks/results/fuzz_mutate.md  (fuzz_mutate.py)

Worker processes (`--jobs`, default every core up to 16; fuzz_parallel.py) generate, lower,
compile (one translation unit per target and task of `--batch` programs) and CPU-check the
programs; the main process loads the cubins they send back, launches them on the GPU and
compares, while the workers build the next tasks.  A progress line every ~10% (`--progress N`);
the table (fuzz_report.py: per target x program kind) is printed and, with `--table`, written as
markdown.  Cost measured on the 2-core CPU machine: ~0.23 CPU-seconds per program for the CPU
target and all four CUDA variants together.

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
import gc
import os
import sys
import tempfile
import time

from .fuzz_build import BATCH, CUDA_VARIANTS
from .fuzz_parallel import run_tasks, tasks_of
from .fuzz_report import Report
from .fuzz_run import Program, compare, inputs_of, run_once, unpack  # noqa: F401 - Program: the public name


def gpu_variants() -> tuple:
    """The CUDA variants the local GPU can run: the sm_80 code path everywhere from sm_80 on
    (compiled for the GPU's own plain arch: sm_80 machine code does not load on a newer GPU, and
    without the `a` features the compiler takes the sm_80 path), sm_90a only on 9.0."""
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("--target cuda needs a CUDA GPU (torch.cuda.is_available() is False); "
                         "--target cpu compiles every CUDA variant without one")
    major, minor = torch.cuda.get_device_capability()
    own = f"sm_{major}{minor}"
    return tuple((name, own if arch == "sm_80" else arch, cfg) for name, arch, cfg in CUDA_VARIANTS
                 if arch == "sm_80" or (major, minor) == (9, 0))


def default_jobs() -> int:
    """Worker processes: TILECRAFT_FUZZ_JOBS, else every core (at most 16)."""
    n = os.environ.get("TILECRAFT_FUZZ_JOBS")
    return max(1, int(n)) if n else min(16, os.cpu_count() or 1)


class GpuChecker:
    """The main process's part of a GPU run: load each program's cubins (built by a worker), launch
    them on the program's inputs and compare with the torch reference and the CPU target's outputs
    (both computed by the worker)."""

    HANG_S = 30.0   # a fuzzed kernel runs for milliseconds: one still running after this is hung

    def __init__(self, variants: tuple, workdir: str):
        self.variants = {v[0]: v for v in variants}
        self.workdir = workdir
        self.lost = ""   # set when a kernel left the CUDA context unusable: nothing after it can run
        self.hung = False

    def _wait(self) -> None:
        """Wait for the launched kernel, but not forever: a deadlocked pipeline (an mbarrier that
        never completes) must end the run with a report, not eat the GPU machine's time."""
        import torch
        done = torch.cuda.Event()
        done.record()
        deadline = time.perf_counter() + self.HANG_S
        while not done.query():
            if time.perf_counter() > deadline:
                self.hung = True
                raise TimeoutError(f"the kernel was still running after {self.HANG_S:.0f} s (a hang)")
            time.sleep(1e-4)

    def check(self, seed: int, index: int, entry: dict, cubins: dict, report: Report) -> None:
        from .fuzz_build import cuda_artifact
        from ..runtime.kernel import JITKernel
        from ..target import Target
        prog = Program(seed, index, self.workdir)
        ref = (seed, index, prog.name)
        if prog.func is None:   # the worker parsed it: the two processes disagree
            for vname in entry["cuda"]:
                report.add(f"gpu {vname}", entry["kind"], ref, "compile", prog.error)
            return
        inputs = inputs_of(prog.mod, prog.data_seed)
        want = dict(enumerate(inputs))
        want.update({i: unpack(t) for i, t in entry.get("expected", {}).items()})
        cpu_want = None
        if "cpu_out" in entry:
            cpu_want = dict(enumerate(inputs))
            cpu_want.update({i: unpack(t) for i, t in entry["cpu_out"].items()})
        for vname, (source, meta, key, seconds) in entry["cuda"].items():
            t0 = time.perf_counter()
            _, arch, configs = self.variants[vname]
            if self.lost:
                why = f"not run: {self.lost}"
            else:
                art = cuda_artifact(prog.func, Target.resolve({"kind": "cuda", "arch": arch}), source, meta, cubins[key])
                args, why = run_once(JITKernel(prog.func, art, pass_configs=configs), prog.mod, prog.data_seed,
                                     device="cuda", wait=self._wait)
                if why:
                    self._check_context(prog.name, vname, why)
                else:
                    args = [a.cpu() for a in args]   # once, for both comparisons
                    why = compare(args, want, prog.mod)
                    why = why and f"GPU vs torch: {why}"
                    if not why and cpu_want is not None:
                        why = compare(args, cpu_want, prog.mod)
                        why = why and f"GPU vs CPU: {why}"
            report.add(f"gpu {vname}", entry["kind"], ref, "mismatch" if why else "compared", why,
                       seconds + time.perf_counter() - t0)

    def _check_context(self, name: str, vname: str, why: str) -> None:
        import torch
        if self.hung:   # synchronizing would wait for the hung kernel
            self.lost = f"{name} on {vname} hung ({why[:200]})"
            return
        try:
            torch.cuda.synchronize()
            torch.ones(1, device="cuda").sum().item()
        except Exception as e:  # noqa: BLE001 - a sticky error: the context is gone
            self.lost = f"the CUDA context was lost after {name} on {vname} ({why[:200]}; then {type(e).__name__})"


def check(pairs: list, target: str, report: Report, workdir: str, jobs: int = 1, batch: int = 16,
          out=sys.stdout, progress_every: int = 0, max_failures: int = 0) -> None:
    """Check the programs [(seed, index)] on `target` (module docstring), recording every outcome in
    `report`; a progress line every `progress_every` programs (default: about every 10%); stop
    early once `max_failures` (when > 0) programs failed (a broken harness must not eat GPU time)."""
    gpu = target == "cuda"
    variants = gpu_variants() if gpu else CUDA_VARIANTS if target == "cpu" else ()
    checker = GpuChecker(variants, workdir) if gpu else None
    batch = max(1, min(batch, BATCH))   # one translation unit per target and task: fuzz_build never pools
    tasks = [(seed, idx, workdir, variants, gpu) for seed, idx in tasks_of(pairs, batch)]
    jobs = min(jobs, len(tasks))   # one task (e.g. --only I): in this process, no pool to start
    total, done, tasks_done, t0 = len(pairs), 0, 0, time.perf_counter()
    every = progress_every or max(batch, total // 10)
    next_line = every
    for res in run_tasks(tasks, jobs):
        for index, entry in sorted(res["programs"].items()):
            ref = (res["seed"], index, entry["name"])
            for tgt, (status, why, seconds) in entry["targets"].items():
                report.add(tgt, entry["kind"], ref, status, why, seconds)
            if entry["cuda"]:
                checker.check(res["seed"], index, entry, res["cubins"], report)
        done += len(res["programs"])
        report.checked = done
        tasks_done += 1
        if gpu and tasks_done % 16 == 0:
            # a kernel's generated call class sits in a reference cycle that holds its loaded module:
            # collect now and then so thousands of modules are not all kept loaded on the device
            gc.collect()
        if done >= next_line or done == total:
            next_line = done + every
            el = time.perf_counter() - t0
            print(f"[fuzz] {done}/{total} programs, {len(report.failures)} failure(s), {el:.0f} s"
                  + (f", ~{el / done * (total - done):.0f} s left" if done < total else ""), file=out, flush=True)
        if checker is not None and checker.lost:   # nothing more can run on this GPU
            print(f"[fuzz] stopped after {done} of {total} programs: {checker.lost}", file=out, flush=True)
            report.stopped = checker
            break
        if max_failures and len(report.failures) >= max_failures:
            print(f"[fuzz] stopped after {done} of {total} programs: {len(report.failures)} failures "
                  f"(--max-failures {max_failures})", file=out, flush=True)
            break


def fuzz(count: int, seed: int, target: str, only=None, save_dir=None, shrink=True, workdir=None,
         out=sys.stdout, jobs: int = 1, batch: int = 16, shrink_tries: int = 150, max_shrink: int = 5,
         progress_every: int = 0, max_failures: int = 0) -> Report:
    """Generate and check `count` programs of `seed` (or the indices `only`); returns the report
    (at most `max_shrink` failing programs shrunk and saved under `save_dir` when given)."""
    own = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix=f"tilecraft-fuzz-{seed}-")
    report = Report()
    indices = list(only) if only is not None else list(range(count))
    check([(seed, i) for i in indices], target, report, workdir, jobs=jobs, batch=batch, out=out,
          progress_every=progress_every, max_failures=max_failures)
    if report.failures and shrink:
        from .fuzz_shrink import shrink_and_save
        seen = set()
        for tgt, (s, i, name), why in report.failures:
            if name in seen or tgt == "worker" or len(seen) >= max_shrink:
                continue
            seen.add(name)
            path = shrink_and_save(Program(s, i, workdir), tgt, why, workdir, save_dir, out=out,
                                   max_tries=shrink_tries)
            print(f"[fuzz] {name} on {tgt}: {why.splitlines()[0][:300]}\n[fuzz]   minimal program: {path}",
                  file=out)
    if own and not report.failures:   # the programs are reproducible from their seeds
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tilecraft.testing.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--target", choices=("cpu", "cpu-only", "cuda"), default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", type=int, nargs="*", help="check only these program indices of the seed")
    ap.add_argument("--jobs", type=int, default=None,
                    help="worker processes that build and CPU-check programs (default: TILECRAFT_FUZZ_JOBS, "
                         "else the cores, at most 16); 1: all in this process")
    ap.add_argument("--batch", type=int, default=16, help="programs per task (one translation unit per target)")
    ap.add_argument("--progress", type=int, default=0, help="a progress line every N programs (default: ~10%%)")
    ap.add_argument("--save-dir", default=None,
                    help="where minimal failing programs go (default: tests/fuzz_regressions of this checkout)")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--shrink-tries", type=int, default=150, help="candidate programs the shrinker may try per failure")
    ap.add_argument("--max-shrink", type=int, default=5, help="failing programs shrunk and saved at most")
    ap.add_argument("--max-failures", type=int, default=0, help="stop once this many programs failed (0: never)")
    ap.add_argument("--table", default=None, help="also write the results table (markdown) to this file")
    ap.add_argument("--mutate", action="store_true",
                    help="mutation mode (fuzz_mutate.py): invalid programs derived from the valid ones, each to be "
                         "refused at its mutated line or to compute the original's result")
    args = ap.parse_args(argv)
    if args.mutate:
        from .fuzz_mutate import main as mutate_main
        return mutate_main(args)
    save_dir = args.save_dir or _default_save_dir()
    jobs = args.jobs or default_jobs()
    t0 = time.perf_counter()
    report = fuzz(args.count, args.seed, args.target, only=args.only, save_dir=save_dir, shrink=not args.no_shrink,
                  jobs=jobs, batch=args.batch, shrink_tries=args.shrink_tries, max_shrink=args.max_shrink,
                  progress_every=args.progress, max_failures=args.max_failures)
    seconds = time.perf_counter() - t0
    for (tgt, why), names in sorted(report.refusals.items()):
        print(f"[fuzz] refused on {tgt} ({len(names)}x, e.g. {names[0]}): {why}")
    for tgt, (s, i, name), why in report.failures[:50]:
        print(f"[fuzz] FAILED {name} on {tgt}: {why.splitlines()[0][:300] if why else ''}\n"
              f"[fuzz]   reproduce: python -m tilecraft.testing.fuzz --seed {s} --only {i} --target {args.target}")
    table = report.table()
    print(table)
    n = report.checked
    summary = (f"compared {n} programs (seed {args.seed}, target {args.target}, {jobs} worker(s)) in {seconds:.0f} s: "
               f"{len(report.failures)} failure(s)")
    if args.table:
        with open(args.table, "w") as f:
            f.write(f"# fuzz run: seed {args.seed}, {n} programs, target {args.target}\n\n"
                    f"{_machine(args.target)}\n\n"
                    f"`python -m tilecraft.testing.fuzz {' '.join(argv if argv is not None else sys.argv[1:])}`\n\n"
                    f"{table}\n\nSeconds: CPU-seconds summed per row (lowering + compiling in the workers, "
                    f"running + comparing); wall time below.\n\n{summary}\n")
    print(summary, flush=True)
    if report.stopped is not None and report.stopped.hung:
        sys.stderr.flush()
        os._exit(1)   # a kernel is still running: skip the teardown that would wait for it
    return 1 if report.failures else 0


def _machine(target: str) -> str:
    """One line naming the machine the table comes from."""
    import platform
    line = f"Machine: {platform.node()}, {os.cpu_count()} cores"
    if target == "cuda":
        import torch
        line += f", {torch.cuda.get_device_name()} (variants: {', '.join(v[0] + ' -> ' + v[1] for v in gpu_variants())})"
    return line


def _default_save_dir() -> str:
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(here, "tests", "fuzz_regressions")


if __name__ == "__main__":
    sys.exit(main())

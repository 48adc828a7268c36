"""The fuzzer's parallel build: worker processes generate, lower, compile and CPU-check batches of
programs; the main process only loads the cubins they send back and launches them on the GPU.

A *task* names up to `batch` programs of one seed by index.  The worker regenerates each program
from (seed, index) (a few ms), so only names go in; what comes back per program and target is an
outcome (status, message, CPU-seconds spent), and for a GPU run also:

- per CUDA variant that compiled: the generated source, its launch metadata and the key of its
  batch's cubin (one translation unit per batch and variant, sent once);
- the torch reference's outputs and the CPU target's outputs (packed tensors, fuzz_run.pack), so
  the main process compares the GPU's results with both without running either itself.

Why processes: the passes are Python (one core per interpreter) and g++ / NVRTC are CPU-bound, so
a 16-core machine builds 16 batches at once; the main process (GPU launches, comparisons) overlaps
with the workers building the next tasks.  Workers never touch CUDA (no context, no device
memory); they run with one OpenMP / torch thread each (the CPU target's kernels are OpenMP).

A worker that dies (a CPU kernel that crashes the process) breaks the pool: the unfinished tasks
are then re-run one by one, each in a fresh single-worker pool, so the crash lands on its own task
and is reported for its programs (target "worker") while every other task still runs.
"""
from __future__ import annotations

import itertools
import os
import time

STATUS = ("compared", "compiled", "mismatch", "compile", "refused")  # outcome kinds a worker reports


def _init_worker():
    os.environ["OMP_NUM_THREADS"] = "1"       # before any OpenMP runtime loads (torch's or the kernels')
    os.environ["TILECRAFT_FUZZ_JOBS"] = "1"   # fuzz_build never nests a pool inside a worker
    import torch
    torch.set_num_threads(1)


def tasks_of(pairs, batch: int) -> list:
    """[(seed, [indices])] for [(seed, index)]: consecutive programs of one seed, `batch` at most."""
    out = []
    for seed, group in itertools.groupby(pairs, key=lambda p: p[0]):
        idx = [i for _, i in group]
        out += [(seed, idx[b:b + batch]) for b in range(0, len(idx), batch)]
    return out


def build_task(task: tuple) -> dict:
    """Run one task in this process: ``(seed, indices, workdir, variants, gpu)`` ->
    ``{"seed", "programs": {index: {...}}, "cubins": {key: bytes}}`` (module docstring)."""
    from .fuzz_run import Program
    seed, indices, workdir, variants, gpu = task
    wd = os.path.join(workdir, f"w{os.getpid()}")   # each process writes its own copies of the modules
    os.makedirs(wd, exist_ok=True)
    progs = [Program(seed, i, wd) for i in indices]
    res = {"seed": seed, "programs": {}, "cubins": {}}
    for p in progs:
        res["programs"][p.index] = {"kind": p.spec["kind"], "name": p.name, "targets": {}, "cuda": {}}
        if p.func is None:
            _put(res, p, "parse", "compile", p.error)
    ok = [p for p in progs if p.func is not None]
    if ok:
        _check_cpu(ok, wd, res, gpu)
        for variant in variants:
            _build_cuda(ok, variant, res, gpu)
    return res


def _put(res, prog, target, status, why="", seconds=0.0):
    res["programs"][prog.index]["targets"][target] = (status, why, seconds)


def _check_cpu(progs, workdir, res, gpu: bool) -> None:
    """Build the batch for the CPU target, run each program and compare it with torch."""
    from .fuzz_build import build_cpu
    from .fuzz_run import compare, expected_of, inputs_of, pack, run_once
    t0 = time.perf_counter()
    built = build_cpu([(p.name, p.func) for p in progs], workdir)
    share = (time.perf_counter() - t0) / len(progs)
    for p in progs:
        t1 = time.perf_counter()
        want = expected_of(p.mod, inputs_of(p.mod, p.data_seed))
        entry = res["programs"][p.index]
        if gpu:
            entry["expected"] = {i: pack(want[i]) for i in p.mod.FZ_OUTPUTS}
        out = built[p.name]
        if out.kernel is None:
            _put(res, p, "cpu", "compile" if out.failed else "refused", out.failed or out.refused, share)
            continue
        args, why = run_once(out.kernel, p.mod, p.data_seed)
        why = why or compare(args, want, p.mod)
        _put(res, p, "cpu", "mismatch" if why else "compared", why and f"CPU vs torch: {why}",
             share + time.perf_counter() - t1)
        if gpu and not why:
            entry["cpu_out"] = {i: pack(args[i]) for i in p.mod.FZ_OUTPUTS}


def _build_cuda(progs, variant, res, gpu: bool) -> None:
    """Lower and compile the batch for one CUDA variant (the Hopper pass configs change GEMM loops
    only, so a variant with configs builds the GEMM programs alone)."""
    from ..target import Target
    from .fuzz_build import compile_batches, lower_all
    vname, arch, configs = variant
    some = [p for p in progs if not configs or p.spec["kind"] == "gemm"]
    if not some:
        return
    target_name = f"{'gpu' if gpu else 'compile'} {vname}"
    t0 = time.perf_counter()
    outcomes, lowered = lower_all([(p.name, p.func) for p in some], Target.resolve({"kind": "cuda", "arch": arch}),
                                  configs)
    compiled = compile_batches("cuda", lowered, arch, configs) if lowered else {}
    share = (time.perf_counter() - t0) / len(some)
    for p in some:
        if p.name in outcomes:
            o = outcomes[p.name]
            _put(res, p, target_name, "compile" if o.failed else "refused", o.failed or o.refused, share)
            continue
        ok, binary, _ = compiled[p.name]
        if not ok:
            _put(res, p, target_name, "compile", f"CUDA compile error ({arch}): {binary}", share)
        elif gpu:
            key = f"{vname}:{id(binary)}"
            res["cubins"][key] = binary
            source, meta = lowered[p.name]
            res["programs"][p.index]["cuda"][vname] = (source, meta, key, share)
        else:
            _put(res, p, target_name, "compiled", "", share)


# ---- the pool ---------------------------------------------------------------------------------------

def _crashed(task, why: str) -> dict:
    """The result of a task whose worker died or raised: every program of it failed on target 'worker'."""
    seed, indices = task[0], task[1]
    return {"seed": seed, "cubins": {}, "programs": {
        i: {"kind": "?", "name": f"fz_{seed}_{i}", "cuda": {},
            "targets": {"worker": ("compile", f"the worker process failed while checking programs {indices} of "
                                              f"seed {seed} ({why}); rerun them alone: --seed {seed} --only "
                                              f"{' '.join(map(str, indices))} --jobs 1", 0.0)}}
        for i in indices}}


def _pool(jobs: int):
    import concurrent.futures
    import multiprocessing
    return concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=_init_worker)


def run_tasks(tasks: list, jobs: int, window: int | None = None):
    """Yield each task's result (in completion order), building in `jobs` worker processes (in this
    process when jobs == 1); at most `window` tasks in flight, so results never pile up."""
    if jobs <= 1:
        for t in tasks:
            yield build_task(t)
        return
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool
    window = window or 3 * jobs
    todo, broken = list(reversed(tasks)), []
    with _pool(jobs) as ex:
        pending = {}
        while todo or pending:
            while todo and len(pending) < window and not broken:
                t = todo.pop()
                pending[ex.submit(build_task, t)] = t
            if not pending:
                break
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                t = pending.pop(f)
                try:
                    r = f.result()
                except BrokenProcessPool:
                    broken.append(t)
                    continue
                except Exception as e:  # noqa: BLE001 - an error escaping the checks is a finding
                    r = _crashed(t, f"{type(e).__name__}: {str(e)[:300]}")
                yield r
            if broken:   # the pool is unusable: finish every unfinished task alone
                broken += list(pending.values()) + list(reversed(todo))
                pending, todo = {}, []
    for t in broken:
        with _pool(1) as ex:
            try:
                r = ex.submit(build_task, t).result()
            except Exception as e:  # noqa: BLE001 - BrokenProcessPool: this task's worker died
                r = _crashed(t, f"{type(e).__name__}: {str(e)[:300]}")
        yield r

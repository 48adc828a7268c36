"""Shrinking a failing fuzzed program to a minimal one, and saving it as a regression test.

Greedy: try simpler variants of the spec one change at a time (plain names, smaller sizes,
simpler options, float32 dtypes, a sub-expression in place of an expression) and keep each
change under which the program still fails the same way on the same target.  The result is
rendered like any program and saved under tests/fuzz_regressions/, where
test_regressions.py runs it on every target.
"""
from __future__ import annotations

import copy
import os
import sys
import time

from .fuzz_build import CUDA_VARIANTS, build_cpu, build_gpu, compile_cuda_batch
from .fuzz_expr import subexpressions
from .fuzz_gen import render
from .fuzz_run import load_module, run_and_compare, run_once

SIMPLER = {"threads": 128, "dyn_m": False, "dyn": None, "loop": None, "form": "assign", "stage": "shared",
           "out": "copy", "stages": 0, "ta": False, "tb": False, "policy": "Square", "clear": True,
           "inplace": False, "reverse": False, "off": [0, 0, 0, 0], "via": "shared", "init": "fill",
           "src_scope": "fragment", "mode": "tile", "trips": 1, "dim": 1, "sym": "s0",
           "dx": "float32", "dy": "float32", "dz": "float32", "dsrc": "float32", "ddst": "float32",
           "dab": "float16", "dacc": "float32", "dc": "float32", "op": "sum", "form_": None, "tail": False, "pair": False}
SIZES = (("M", "bm"), ("N", "bn"), ("K", "bk"), ("M2", "bm"), ("N2", "bn"))
PLAIN_NAMES = [f"v{n}" for n in range(14)]


def _signature(why: str) -> str:
    """The kind of a failure (wrong answer / run failure / compile error / ...), kept while shrinking."""
    return why.split(":")[0]


def failure(spec: dict, target: str, workdir: str) -> str:
    """How `spec` fails on `target` ('' when it does not)."""
    path = os.path.join(workdir, f"{spec['name']}.py")
    with open(path, "w") as f:
        f.write(render(spec))
    try:
        mod = load_module(path)
    except Exception as e:  # noqa: BLE001
        return f"parse: {type(e).__name__}: {e}"
    if target == "parse":
        return ""
    seed = spec.get("data_seed", 0)
    if target == "cpu":
        out = build_cpu([(spec["name"], mod.FZ_FUNC)], workdir)[spec["name"]]
        if out.kernel is None:
            return out.failed
        bad = run_and_compare(out.kernel, mod, seed)
        return bad and f"CPU vs torch: {bad}"
    kind, variant_name = target.split(" ", 1)
    if kind == "compile":
        variant = next(v for v in CUDA_VARIANTS if v[0] == variant_name)
        return compile_cuda_batch([(spec["name"], mod.FZ_FUNC)], variant)[spec["name"]].failed
    from .fuzz import gpu_variants   # compiled for what this GPU loads (the sm_80 path: its own arch)
    variant = next(v for v in gpu_variants() if v[0] == variant_name)
    out = build_gpu(mod.FZ_FUNC, variant)
    if out.kernel is None:
        return out.failed
    bad = run_and_compare(out.kernel, mod, seed, device="cuda")
    if bad:
        return f"GPU vs torch: {bad}"
    cpu = build_cpu([(spec["name"], mod.FZ_FUNC)], workdir)[spec["name"]]   # the other reference
    args, why = run_once(cpu.kernel, mod, seed) if cpu.kernel is not None else (None, "no CPU kernel")
    if why:
        return ""
    bad = run_and_compare(out.kernel, mod, seed, device="cuda", expected=dict(enumerate(args)))
    return bad and f"GPU vs CPU: {bad}"


def candidates(spec: dict):
    """Simpler specs than `spec`, one change each, roughly most-simplifying first."""
    def with_(**kw):
        c = copy.deepcopy(spec)
        c.update(kw)
        return c
    if spec["names"] != PLAIN_NAMES:
        yield with_(names=PLAIN_NAMES)
    for key in ("expr", "expr2", "loop_expr"):
        e = spec.get(key)
        if e is None:
            continue
        if e != ["leaf", "x"]:
            yield with_(**{key: ["leaf", "x"]})
        for sub in subexpressions(e):
            yield with_(**{key: sub})
    for size, tile in SIZES:
        if size in spec:
            for v in (spec[tile], spec[tile] + 1, spec[size] // 2):
                if spec[tile] <= v < spec[size]:
                    yield with_(**{size: v})
    for tile in ("bm", "bn", "bk"):
        if tile in spec and spec[tile] > 16:
            yield with_(**{tile: spec[tile] // 2})
    for key, simple in SIMPLER.items():
        if key in spec and spec[key] != simple:
            yield with_(**{key: simple})


def shrink(spec: dict, target: str, why: str, workdir: str, budget_s: float = 120.0, max_tries: int = 150) -> dict:
    """A minimal spec that still fails on `target` the way `why` says."""
    want = _signature(why)
    base = spec["name"]
    t0, tries, improved = time.perf_counter(), 0, True
    while improved and tries < max_tries and time.perf_counter() - t0 < budget_s:
        improved = False
        for cand in candidates(spec):
            tries += 1
            cand["name"] = f"{base}_s{tries}"
            try:
                bad = failure(cand, target, workdir)
            except Exception as e:  # noqa: BLE001 - an exception while checking is a failure too
                bad = f"checker: {type(e).__name__}: {e}"
            if bad and _signature(bad) == want:
                spec, improved = cand, True
                break
            if tries >= max_tries or time.perf_counter() - t0 >= budget_s:
                break
    spec = copy.deepcopy(spec)
    spec["name"] = base
    return spec


def _gist(why: str) -> str:
    """The failure's first line, and the compiler's first error line when there is one."""
    lines = why.splitlines() or [""]
    err = next((ln.strip() for ln in lines[1:] if "error" in ln), "")
    return lines[0][:300] + (f"\n#   {err[:300]}" if err else "")


def shrink_and_save(prog, target: str, why: str, workdir: str, save_dir: str | None, out=sys.stdout,
                    max_tries: int = 150) -> str:
    """Shrink `prog` (a fuzz.Program failing on `target`) and write it to `save_dir`; the path."""
    spec = dict(prog.spec, data_seed=prog.data_seed)
    small = shrink(spec, target, why, workdir, max_tries=max_tries)
    final = failure(small, target, workdir) or why
    text = render(small)
    header = (f"# A fuzzer finding, kept as a regression test (tests/fuzz_regressions/test_regressions.py).\n"
              f"# Found by: python -m tilecraft.testing.fuzz --seed {prog.seed} --only {prog.index}\n"
              f"# Failed on {target}: {_gist(final)}\n")
    text = header + text + f"FZ_DATA_SEED = {prog.data_seed}\n"
    if save_dir is None:
        save_dir = workdir
    os.makedirs(save_dir, exist_ok=True)
    path = os.path.join(save_dir, f"{prog.name}.py")
    with open(path, "w") as f:
        f.write(text)
    return path

"""Where a program's time goes in CPU mode: `python benchmarks/cpu_time_split.py PROG.py [args]`.

Runs the program as `tilecraft run --cpu` does and attributes wall time (exclusively: the innermost
category running) to: import (torch + tilecraft), frontend+lowering (tilecraft's Python compile,
cache lookups included), g++ (the C++ compile), kernel (the CPU kernels' calls), triton (Triton's
interpreter), torch (torch functions the program calls: its reference, its inputs), bench (the
host timing loop's own overhead, when reached as tilecraft.profiler.bench.do_bench) and other (the
program's Python).  Use a fresh TILECRAFT_CACHE_DIR for cold compiles.  Prints a table and, with `--json FILE`, writes
it.  Kernels go through the checked call (the fast path is turned off) so that each call is timed.
"""
from __future__ import annotations

import json
import os
import sys
import time

T0 = time.perf_counter()
_acc: dict = {}
_stack: list = []   # [category, start]


def _enter(cat):
    now = time.perf_counter()
    if _stack:
        top = _stack[-1]
        _acc[top[0]] = _acc.get(top[0], 0.0) + now - top[1]
    _stack.append([cat, now])


def _leave():
    now = time.perf_counter()
    cat, start = _stack.pop()
    _acc[cat] = _acc.get(cat, 0.0) + now - start
    if _stack:
        _stack[-1][1] = now


def _wrap(obj, name, cat):
    orig = getattr(obj, name)

    def wrapped(*a, **k):
        _enter(cat)
        try:
            return orig(*a, **k)
        finally:
            _leave()
    wrapped.__wrapped__ = orig
    setattr(obj, name, wrapped)


def main():
    argv = sys.argv[1:]
    out_json = None
    if argv and argv[0] == "--json":
        out_json, argv = argv[1], argv[2:]
    os.environ["TILECRAFT_RUN_ON_CPU"] = "1"
    os.environ.setdefault("TRITON_INTERPRET", "1")
    _enter("import")
    import torch  # noqa: F401
    import tilecraft  # noqa: F401
    import importlib
    build = importlib.import_module("tilecraft.compiler.build")
    cxx = importlib.import_module("tilecraft.compiler.cxx")
    fastpath = importlib.import_module("tilecraft.runtime.fastpath")
    kernel = importlib.import_module("tilecraft.runtime.kernel")
    bench = importlib.import_module("tilecraft.profiler.bench")
    _leave()
    jit = importlib.import_module("tilecraft.jit")
    jit_eager = importlib.import_module("tilecraft.jit_eager")
    _wrap(jit.JITFactory, "compile", "frontend+lowering")
    _wrap(jit_eager.EagerJit, "kernel_for", "frontend+lowering")
    _wrap(jit, "compile", "frontend+lowering")
    _wrap(build, "build", "frontend+lowering")
    _wrap(cxx, "compile_cxx", "g++")
    fastpath.specialize = lambda *a, **k: None
    _wrap(kernel._CpuLauncher, "__call__", "kernel")
    _wrap(bench, "do_bench", "bench")
    try:
        from triton.runtime import interpreter
        _wrap(interpreter.GridExecutor, "__call__", "triton")
    except ImportError:
        pass
    from torch.overrides import TorchFunctionMode

    class Timed(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if _stack and _stack[-1][0] in ("torch", "kernel", "triton", "g++", "frontend+lowering"):
                return func(*args, **(kwargs or {}))
            _enter("torch")
            try:
                return func(*args, **(kwargs or {}))
            finally:
                _leave()
    # the frontend's torch calls (dtype checks...) stay in their category: Timed only starts "torch"
    # from the program's code, bench or other
    from tilecraft.compat.run import run_program
    prog = os.path.abspath(argv[0])
    _enter("other")
    status = "ok"
    try:
        with Timed():
            run_program(prog, argv[1:])
    except SystemExit as e:
        status = f"exit {e.code}" if e.code not in (None, 0) else "ok"
    except BaseException as e:  # noqa: BLE001
        status = f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        while _stack:
            _leave()
    total = time.perf_counter() - T0
    cats = ["import", "frontend+lowering", "g++", "kernel", "torch", "triton", "bench", "other"]
    row = {c: round(_acc.get(c, 0.0), 2) for c in cats}
    import resource
    cpu = sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
              for f in ("ru_utime", "ru_stime"))
    row.update(program=argv[0], total=round(total, 2), cpu_s=round(cpu, 1), status=status,
               load=round(os.getloadavg()[0], 1))
    print("\n[cpu_time_split] " + " | ".join(f"{k} {row[k]}" for k in ["total", *cats, "cpu_s", "load"]) + f" | {status}",
          file=sys.stderr)
    if out_json:
        with open(out_json, "w") as f:
            json.dump(row, f)


if __name__ == "__main__":
    main()

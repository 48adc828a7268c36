"""Stand-ins for compiled kernels that implement the JITKernel surface the tools rely on.

``kernel.params`` (name, shape, dtype, is_output), ``kernel.out_idx``, ``kernel.name``,
``kernel.device_type`` and ``kernel(*inputs)`` returning the outputs. The work is done by torch,
so the profiler and autotuner can be tested without a compiler.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class ParamInfo:
    name: str
    shape: tuple
    dtype: torch.dtype
    is_output: bool = False


class FakeKernel:
    def __init__(self, fn: Callable, params: list[ParamInfo], name: str = "fake_kernel",
                 device_type: str = "cpu", prim_func=None):
        self.fn = fn
        self.params = params
        self.out_idx = [i for i, p in enumerate(params) if p.is_output]
        self.name = name
        self.device_type = device_type
        self.prim_func = prim_func
        self.calls = 0

    def __call__(self, *inputs):
        n_in = sum(not p.is_output for p in self.params)
        if len(inputs) != n_in:
            raise TypeError(f"{self.name}: expected {n_in} inputs, got {len(inputs)}")
        self.calls += 1
        return self.fn(*inputs)


def matmul_params(m: int, n: int, k: int, dtype=torch.float32) -> list[ParamInfo]:
    return [ParamInfo("A", (m, k), dtype), ParamInfo("B", (k, n), dtype), ParamInfo("C", (m, n), dtype, True)]


SECONDS_PER_CHUNK = 1e-5


class VirtualClock:
    """A clock only the stand-in kernels move: each call of a chunked matmul advances it by its
    cost (SECONDS_PER_CHUNK per chunk), every reading by 1 ns.  Tests that compare configs by
    speed put it in the profiler's place (`use_virtual_clock`), so which config is fastest is a
    property of the configs, not of the machine's load (CI's 2 cores are shared)."""
    now = 0.0

    @classmethod
    def advance(cls, seconds: float):
        cls.now += seconds

    @classmethod
    def perf_counter(cls) -> float:
        cls.now += 1e-9
        return cls.now


def reference_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The tests' reference program: A @ B, costing as much as 4 chunks on the virtual clock.  A reference
    that did not move the clock would read as free (its calls cost only the clock's 1 ns readings), and the
    profiler, sizing its repetitions by the estimate, would call it up to its cap of 10^6 times."""
    VirtualClock.advance(4 * SECONDS_PER_CHUNK)
    return a @ b


def use_virtual_clock(monkeypatch):
    """The profiler's CPU timing reads VirtualClock instead of time.perf_counter."""
    import types

    from tilecraft.profiler import bench
    monkeypatch.setattr(bench, "time", types.SimpleNamespace(perf_counter=VirtualClock.perf_counter,
                                                             sleep=time.sleep))


def _virtual_clock_in_this_worker():
    """use_virtual_clock for the rest of this process's life: in a Ray worker, which the test's cluster
    fixture shuts down with the module (the driver's own tests patch with monkeypatch instead)."""
    import types

    from tilecraft.profiler import bench
    bench.time = types.SimpleNamespace(perf_counter=VirtualClock.perf_counter, sleep=time.sleep)


def chunked_matmul(chunk: int) -> Callable:
    """C = A @ B computed in row chunks of ``chunk``: small chunks are slower.

    Each chunk also sleeps ``SECONDS_PER_CHUNK``: a cost floor that load on a shared CI machine
    can only add to, so the ordering of configs by speed is deterministic (compute alone is at
    the mercy of OpenMP barriers when another process holds a core).
    """

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        n_chunks = 0
        for i in range(0, a.shape[0], chunk):
            out[i:i + chunk] = a[i:i + chunk] @ b
            n_chunks += 1
        time.sleep(SECONDS_PER_CHUNK * n_chunks)
        VirtualClock.advance(SECONDS_PER_CHUNK * n_chunks)
        return out

    return run


class FakeJit:
    """A ``@tilelang.jit`` stand-in: ``.fn`` and ``.compile_kwargs``; calling it "compiles".

    ``fn(*args, **config)`` returns a dict describing the kernel (or raises: a compile error).
    A compile costs ``compile_s`` seconds unless the disk cache (namespace "fake-kernels") has the
    entry already; every compile leaves an event file ``<pid>_<hit|miss>_<config>`` in
    ``log_dir`` so tests can see who compiled what, and whether it was a cache hit.
    """

    def __init__(self, fn, log_dir=None, compile_s: float = 0.0, out_idx=(-1,), target="cpu"):
        self.fn = fn
        self.__name__ = fn.__name__
        self.compile_kwargs = {"out_idx": list(out_idx), "target": target, "pass_configs": None}
        self.log_dir = log_dir
        self.compile_s = compile_s

    def __call__(self, *args, **kwargs):
        import os
        import time

        from tilecraft.compiler.cache import DiskCache, cache_key

        spec = self.fn(*args, **kwargs)
        key = cache_key("fake", self.fn.__qualname__, args, kwargs)
        cache = DiskCache("fake-kernels")
        hit = cache.get(key) is not None
        if not hit:
            time.sleep(self.compile_s)
            cache.put(key, {"spec": repr(spec)}, {})
        if self.log_dir is not None:
            tag = "-".join(f"{k.replace('_', '')}{v}" for k, v in sorted(kwargs.items()))
            (self.log_dir / f"{os.getpid()}_{'hit' if hit else 'miss'}_{tag}_{time.monotonic_ns()}").touch()
        return make_matmul_kernel(spec)


def make_matmul_kernel(spec: dict) -> FakeKernel:
    """spec: M, N, K, chunk (speed), bug (wrong answers), launch_fail (raises when called), threads
    (raises when called with another torch thread count: a kernel timed on the wrong number of cores);
    virtual_clock_off_pid: called in any other process (a Ray worker timing it), the kernel puts the
    virtual clock in that process's profiler first, so its timings there are the configs' own."""
    run = chunked_matmul(spec["chunk"])

    def kernel(a, b):
        driver = spec.get("virtual_clock_off_pid")
        if driver is not None and os.getpid() != driver:
            _virtual_clock_in_this_worker()
        if spec.get("launch_fail"):
            raise RuntimeError("illegal memory access (simulated)")
        if spec.get("threads") and torch.get_num_threads() != spec["threads"]:
            raise RuntimeError(f"run with {torch.get_num_threads()} threads, not {spec['threads']}")
        if spec.get("nice") is not None and os.getpriority(os.PRIO_PROCESS, 0) != spec["nice"]:
            raise RuntimeError(f"run at niceness {os.getpriority(os.PRIO_PROCESS, 0)}, not {spec['nice']}")
        c = run(a, b)
        if spec.get("bug"):
            c[-8:, :] = 0  # 8 wrong rows: well above the 1% mismatch allowance
        return c

    return FakeKernel(kernel, matmul_params(spec["M"], spec["N"], spec["K"]), name="fake_matmul",
                      prim_func=("prim_func", spec["chunk"]))


def read_events(log_dir) -> list[tuple[int, str, str]]:
    """(pid, "hit"|"miss", config tag) for every compile logged by FakeJit."""
    events = []
    for p in sorted(log_dir.iterdir()):
        pid, kind, tag, _ = p.name.split("_")
        events.append((int(pid), kind, tag))
    return events

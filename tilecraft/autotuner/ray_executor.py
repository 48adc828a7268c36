"""The Ray executor: a tuning run's compiles and benchmarks as tasks on a Ray cluster.

    result = AutoTuner.from_kernel(matmul, configs).set_kernel_parameters((M, N, K)).run(executor="ray")
    result = ...run(executor=RayExecutor(address="ray://head:10001"))

How a run goes (the scheduling, retries and placement are Ray's):

1. The program (the jit factory pickles as its function and options; ``Program.prepare`` has resolved
   the target here) and the configs are pickled once (cloudpickle) and put in Ray's object store, and
   again with the profile settings and any ``set_autotune_inputs`` tensors; every task gets a
   reference and a config index. Compile tasks get the first: unpickling the profile settings (a
   ``ref_prog`` using torch) would import torch, and a compile needs neither torch nor the tuner, so
   a fresh worker starts compiling after importing the compiler only (importing torch costs seconds
   per worker process, as much as several compiles, and stopped two workers scaling: 1.56x, issue 24). Each task also gets this process's ``TILECRAFT_*`` settings and ``sys.path``, applied for
   the task's duration: a worker compiles with the same options into the same cache (a shared one,
   ``TILECRAFT_CACHE_URL``, when the workers are on other hosts) and imports the same modules.
2. Compile phase: one task per config, ``num_cpus=1``. It builds the config for its artifacts (the
   cache entry) and returns whether that worked.
3. Benchmark phase: one task per config that compiled, pinned ``num_gpus=1`` for a CUDA target (one
   task per GPU at a time); for the CPU target a task takes every CPU of the smallest node, so no
   two benchmarks (and no compile) share a node's cores. The task compiles again (a cache hit),
   checks against the reference, times, and returns the config's ``ConfigResult``. It times with
   the thread count this process would use (``runtime.openmp.thread_count()``: torch's intra-op
   count, which the CPU target's kernels and a torch ``ref_prog`` run with), at most the CPUs the
   task holds: Ray starts a worker with ``OMP_NUM_THREADS`` set to its first task's CPUs (1 for a
   compile task), and kernels timed on one thread where the local executor uses two were ranked on
   different numbers (1.1-2.4 ms against 0.54-0.78 ms, issue 24); and at this process's niceness
   (Ray starts workers at 15: on a shared machine they waited behind every other job). Why on the workers and not here:
   the CPU target's binaries are built for the machine that compiles them (``-march=native``, the
   machine in the cache key), so on a cluster they are timed where they were built, nodes in
   parallel; on a local Ray the conditions are the local executor's.
4. Here: the fastest config is loaded (a cache hit) and returned; the reference is timed by one more
   benchmark task on the best config's inputs.

A failure on a worker loses that config only, with its reason in the table: an exception in the
compiler or the kernel (the task catches it), a worker that crashed or a node that was lost (Ray's
error, tasks are not retried: ``max_retries=0``), or a task past its time (``timeout`` seconds from
the moment it has unpickled its payload on its worker, as it tells a small clock actor: importing
what the program needs, torch for one, is a fresh worker's start-up, not the config's time; then
cancelled with ``force=True``, which ends that worker process).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any, Iterator, Sequence

from tqdm.auto import tqdm

from .. import env
from .parallel import describe_exception
from .result import COMPILE_ERROR, LAUNCH_ERROR, OK, TIMEOUT, ConfigResult

__all__ = ["RayExecutor"]

_ENV_PREFIXES = ("TILECRAFT_", "TILELANG_")


# ----------------------------------------------------------------------------------- in a worker


@contextlib.contextmanager
def _driver_context(driver: dict) -> Iterator[None]:
    """The driver's TILECRAFT_* variables, knob overrides and import path, for one task (a worker
    process runs many tasks, of many runs: everything is put back afterwards)."""
    saved_env = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)}
    saved_overrides = dict(env._overrides)
    saved_path = list(sys.path)
    try:
        for k in saved_env:
            del os.environ[k]
        os.environ.update(driver["environ"])
        env._overrides.clear()
        env._overrides.update(driver["overrides"])
        sys.path[:0] = [p for p in driver["sys_path"] if p not in sys.path and os.path.isdir(p)]
        yield
    finally:
        for k in [k for k in os.environ if k.startswith(_ENV_PREFIXES)]:
            del os.environ[k]
        os.environ.update(saved_env)
        env._overrides.clear()
        env._overrides.update(saved_overrides)
        sys.path[:] = saved_path


def _unpack(payload: bytes) -> tuple:
    import cloudpickle
    return cloudpickle.loads(payload)


class _Clock:
    """When each task started on its worker (a Ray actor: tasks report, the driver reads)."""

    def __init__(self):
        self.starts: dict = {}

    def started(self, tag: tuple, when: float) -> None:
        self.starts[tag] = when

    def read(self) -> dict:
        return dict(self.starts)


def _report_start(driver: dict, tag: tuple) -> None:
    clock = driver.get("clock")
    if clock is not None:
        clock.started.remote(tag, time.time())


def _compile_task(payload: bytes, index: int, driver: dict) -> tuple[bool, str | None, float]:
    """(ok, reason, seconds): build config ``index`` for its cache entry."""
    with _driver_context(driver):
        program, configs = _unpack(payload)
        _report_start(driver, ("compile", index))
        t0 = time.perf_counter()
        try:
            program.precompile(configs[index])
            return True, None, time.perf_counter() - t0
        except BaseException as exc:  # noqa: BLE001 - the config's failure, reported in its row
            return False, describe_exception(exc), time.perf_counter() - t0


@contextlib.contextmanager
def _bench_threads(driver: dict) -> Iterator[None]:
    """torch's thread count (and so the kernels', runtime/openmp.py) set to the driver's, at most the
    CPUs this task holds, for one benchmark task; put back afterwards."""
    import torch

    want = driver.get("threads")
    saved = torch.get_num_threads()
    if want:
        import ray
        held = int(ray.get_runtime_context().get_assigned_resources().get("CPU", 0))
        torch.set_num_threads(max(1, min(want, held)) if held >= 1 else want)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


@contextlib.contextmanager
def _bench_priority(driver: dict) -> Iterator[None]:
    """Every thread of this worker at the driver's niceness for one benchmark task, put back afterwards.
    Ray starts its workers at niceness 15 (its ``worker_niceness``): on a machine other jobs share,
    a benchmark task then waited behind them (a 0.5 ms GEMM's median call took 16-28 ms in a Ray
    runoff task, 0.8-1.1 ms in the local executor's process, issue 24). Lowering a niceness needs
    the privilege to (root, or RLIMIT_NICE); without it the task runs as Ray started it."""
    want = driver.get("niceness")
    saved: dict[int, int] = {}
    if want is not None and hasattr(os, "setpriority"):
        try:
            tids = [int(t) for t in os.listdir("/proc/self/task")]
        except OSError:
            tids = [0]
        for tid in tids:
            try:
                now = os.getpriority(os.PRIO_PROCESS, tid)
                if now > want:
                    os.setpriority(os.PRIO_PROCESS, tid, want)
                    saved[tid] = now
            except OSError:  # no privilege, or a thread that ended
                pass
    try:
        yield
    finally:
        for tid, nice in saved.items():
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except OSError:
                pass


def _bench_task(payload: bytes, index: int, driver: dict) -> ConfigResult:
    """Compile (a cache hit), check and time config ``index``: its ``ConfigResult``."""
    with _driver_context(driver), _bench_threads(driver), _bench_priority(driver):
        from .tuner import AutoTuner

        program, configs, pa, inputs = _unpack(payload)
        _report_start(driver, ("bench", index))
        tuner = AutoTuner(program.fn, [configs[index]])
        r = ConfigResult(index, dict(configs[index]))
        pair = tuner._compile(program, r)
        if pair is not None:
            tuner._evaluate(r, pair[0], pa, inputs)
        return r


def _runoff_task(payload: bytes, indices: list[int], driver: dict) -> dict[int, list[list[float]]]:
    """The runoff's samples of configs ``indices``, one list per round, timed in one task (``AutoTuner.runoff``)."""
    with _driver_context(driver), _bench_threads(driver), _bench_priority(driver):
        from .tuner import AutoTuner

        program, configs, pa, inputs = _unpack(payload)
        leaders = [ConfigResult(i, dict(configs[i])) for i in indices]
        return AutoTuner(program.fn, [configs[i] for i in indices]).runoff(program, leaders, pa, inputs)


def _reference_task(payload: bytes, index: int, driver: dict) -> float | None:
    """The reference program's time on config ``index``'s inputs (the statistic of measure.py's policy)."""
    with _driver_context(driver), _bench_threads(driver), _bench_priority(driver):
        from ..profiler import Profiler
        from .measure import policy_for
        from .tuner import AutoTuner

        program, configs, pa, inputs = _unpack(payload)
        kernel, _ = program.compile(configs[index])
        profiler = Profiler(kernel, pa.supply_type)
        tensors = AutoTuner(program.fn, [configs[index]])._inputs_for(profiler, pa, inputs)
        return policy_for(profiler.device_type).latency(
            profiler.bench_stats(pa.ref_prog, pa.warmup, pa.rep, input_tensors=tensors))


# ----------------------------------------------------------------------------------- the driver


class RayExecutor:
    """Runs a tuning run's compiles and benchmarks on Ray (see the module docstring).

    ``address``: the cluster to join (``ray.init(address=...)``; default ``TILECRAFT_RAY_ADDRESS``,
    else a local Ray started with ``num_cpus`` CPUs). A Ray already initialised in this process is
    used as it is. ``bench_resources``: Ray resources of a benchmark task, instead of the defaults
    (``{"num_gpus": 1}`` for CUDA, a node's CPUs for the CPU target).
    """

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 bench_resources: dict | None = None):
        self.address = address
        self.num_cpus = num_cpus
        self.bench_resources = bench_resources
        self.phase_seconds: dict[str, float] = {}

    def _ray(self):
        try:
            import ray
        except ImportError as exc:
            raise ImportError("the ray executor needs the ray package: pip install 'tilecraft[scale]'") from exc
        if not ray.is_initialized():
            address = self.address or env.ray_address()
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=self.num_cpus, include_dashboard=False, log_to_driver=False)
        return ray

    @staticmethod
    def _driver() -> dict:
        from ..runtime.openmp import thread_count
        return {"environ": {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)},
                "overrides": dict(env._overrides), "sys_path": [p for p in sys.path if p],
                "threads": thread_count(),
                "niceness": os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None}

    @staticmethod
    def payloads(program, configs: Sequence[dict], pa, user_inputs) -> tuple[bytes, bytes]:
        """(what a compile task unpickles: the program and the configs; what a benchmark task does:
        those, the profile settings and the inputs)."""
        import cloudpickle
        return (cloudpickle.dumps((program, list(configs))),
                cloudpickle.dumps((program, list(configs), pa, user_inputs)))

    def _bench_options(self, ray, program) -> dict:
        if self.bench_resources is not None:
            return dict(self.bench_resources)
        target = getattr(program, "_target", None)
        if getattr(target, "kind", None) == "cuda":
            return {"num_gpus": 1, "num_cpus": 0}
        cpus = [n["Resources"].get("CPU", 0) for n in ray.nodes() if n.get("Alive")]
        return {"num_cpus": max(1, int(min(cpus))) if cpus else 1}

    def _gather(self, ray, refs: dict, timeout: float | None, clock: Any, phase: str, desc: str) -> dict[int, Any]:
        """index -> the task's value, or the exception that lost it (a RayError, or TimeoutError for
        a task still running ``timeout`` seconds after it started)."""
        out: dict[int, Any] = {}
        pending = list(refs)
        with tqdm(total=len(refs), desc=desc, disable=None, leave=False) as bar:
            while pending:
                done, pending = ray.wait(pending, num_returns=1, timeout=None if timeout is None else 0.5)
                if timeout is not None and not done:
                    starts, now = ray.get(clock.read.remote()), time.time()
                    late = [ref for ref in pending if now - starts.get((phase, refs[ref]), now) > timeout]
                    for ref in late:
                        ray.cancel(ref, force=True)
                        out[refs[ref]] = TimeoutError(f"timed out after {timeout:g} s")
                        bar.update(1)
                    pending = [ref for ref in pending if ref not in late]
                    continue
                for ref in done:
                    try:
                        out[refs[ref]] = ray.get(ref)
                    except ray.exceptions.RayError as exc:  # a crashed worker, a lost node, a cancelled task
                        out[refs[ref]] = exc
                    bar.update(1)
        return out

    def run(self, program, configs: Sequence[dict], results: list[ConfigResult], pa, user_inputs) -> None:
        """Compile and benchmark every config in ``results`` (status OK) on Ray; fills them in."""
        ray = self._ray()
        program.prepare()
        build_payload, payload = (ray.put(p) for p in self.payloads(program, configs, pa, user_inputs))
        driver = self._driver()
        clock = ray.remote(_Clock).options(num_cpus=0).remote() if pa.timeout is not None else None
        driver["clock"] = clock
        self._payload, self._driver_info = payload, dict(driver, clock=None)

        t0 = time.perf_counter()
        compile_task = ray.remote(_compile_task).options(num_cpus=1, max_retries=0)
        todo = [r for r in results if r.status == OK]
        refs = {compile_task.remote(build_payload, r.index, driver): r.index for r in todo}
        outcomes = self._gather(ray, refs, pa.timeout, clock, "compile", f"compiling {program.name} on ray")
        for r in todo:
            value = outcomes.get(r.index)
            if isinstance(value, TimeoutError):
                r.status, r.reason = TIMEOUT, f"compile {value}"
            elif isinstance(value, BaseException):
                r.status, r.reason = COMPILE_ERROR, f"compile task lost: {describe_exception(value, 500)}"
            elif value is not None:
                ok, reason, seconds = value
                r.compile_s = seconds
                if not ok:
                    r.status, r.reason = COMPILE_ERROR, reason
        self.phase_seconds["compile"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        options = self._bench_options(ray, program)
        bench_task = ray.remote(_bench_task).options(max_retries=0, **options)
        todo = [r for r in results if r.status == OK]
        refs = {bench_task.remote(payload, r.index, driver): r.index for r in todo}
        # a benchmark task compiles (a cache hit), checks and times: more than one call's worth
        measured = self._gather(ray, refs, None if pa.timeout is None else pa.timeout * 4, clock, "bench",
                                f"benchmarking {program.name} on ray")
        for r in todo:
            value = measured.get(r.index)
            if isinstance(value, TimeoutError):
                r.status, r.reason = TIMEOUT, f"benchmark {value}"
            elif isinstance(value, BaseException):
                r.status, r.reason = LAUNCH_ERROR, f"benchmark task lost: {describe_exception(value, 500)}"
            elif value is not None:
                r.status, r.latency, r.stats, r.reason = value.status, value.latency, value.stats, value.reason
        self.phase_seconds["benchmark"] = time.perf_counter() - t0
        if clock is not None:
            ray.kill(clock)

    def runoff(self, program, indices: list[int]) -> dict[int, list[list[float]]]:
        """The leaders timed again, all in one benchmark task: on one node, under the same conditions
        (tuner.py's runoff); each leader's samples, one list per round."""
        ray = self._ray()
        task = ray.remote(_runoff_task).options(max_retries=0, **self._bench_options(ray, program))
        try:
            return ray.get(task.remote(self._payload, list(indices), self._driver_info))
        except ray.exceptions.RayError as exc:  # the first measurements stand
            import logging
            logging.getLogger("tilecraft.autotuner").warning("autotune %s: the runoff task was lost: %s",
                                                             program.name, describe_exception(exc, 500))
            return {}

    def reference_latency(self, program, best_index: int, pa) -> float | None:
        """The reference's time on the best config's inputs (one more benchmark task)."""
        ray = self._ray()
        task = ray.remote(_reference_task).options(max_retries=0, **self._bench_options(ray, program))
        return ray.get(task.remote(self._payload, best_index, self._driver_info))

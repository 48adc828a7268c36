"""``AutoTuner``: compile every config (in parallel), check it, time it, keep the fastest.

A run goes:
1. The tuning database (database.py) is asked for this problem (program, arguments, target,
   machine, check settings, compiler version): configs it knows are not compiled or benchmarked
   again; when it knows them all, only the best config is compiled (a cache hit).
2. The executor (executors.py) compiles and measures the rest. Local: the first config(s) are
   compiled in this process until one succeeds (this resolves ``target="auto"`` and warms up
   imports once), the rest by forked workers (``parallel.precompile``) purely to fill the disk
   cache; then config by config, in this process: compile (now a cache hit), check against
   ``ref_prog`` (or ``manual_check_prog``) on the same inputs, time with the profiler. Ray
   (ray_executor.py): compile tasks on CPU workers, benchmark tasks one per GPU. A config that
   fails to compile, to launch, or to match is recorded with its reason and skipped. With
   ``early_stop=True`` (``early_stop_factor=f``) a checked config is first timed briefly; one
   slower than f times the best so far is recorded with that time and not timed in full.
3. The runoff (measure.py, a ``MeasurePolicy`` per device the kernels run on): configs measured in
   this run whose latency is within the policy's window of the fastest -- CUDA: 5%, at most 4;
   CPU: every config that passed, at most the fastest 16 -- are timed again (by the executor, where it timed them: in this process,
   or in one Ray benchmark task), in interleaved rounds whose order rotates (CUDA: 3 rounds of
   ``warmup`` + ``rep / 2`` ms; CPU: 12 rounds of ``warmup / 10`` + ``rep / 5`` ms), so drift in
   the machine's speed (load, clocks, thermals) falls on all of them alike; each leader's latency
   becomes the policy's statistic of all its runoff samples, and the leaders whose ratio to the
   fastest the rounds cannot tell from a tie are marked ``within_noise`` (the table says so). Then
   the fastest wins, and configs within the policy's tie of it (CUDA 1%, CPU 3%) count as a tie
   that the first listed wins (TileLang's autotuner times each config once and keeps the first of
   equal latencies, ``latency < best_latency``). So two runs, or two executors, that see the same
   configs within noise choose the same one. The cost, only when two or more configs are that
   close: CUDA ``3 x (warmup + rep / 2)`` ms per leader; CPU ``12 x (warmup / 10 + rep / 5)`` ms.
4. The best config's kernel is loaded here, the reference is timed on its inputs, and the new
   outcomes are written to the database.

The latency of a config is the policy's statistic of its samples: on CUDA the median (robust to
the odd slow repetition); on the CPU target a low quantile (5%), the calls that no other job on the
machine disturbed -- load only ever adds time to a call (measure.py).
"""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from tqdm.auto import tqdm

from .. import env
from ..compiler.cache import cache_key, compiler_version_hash
from ..profiler import Profiler, TensorSupplyType
from ..profiler.profiler import _sync
from . import parallel
from .database import TuningDatabase
from .executors import resolve_executor
from .inputs import current_autotune_inputs
from .measure import MeasurePolicy, choose_best, policy_for, runoff_leaders, settle_runoff
from .program import Program
from .result import (COMPILE_ERROR, CPU_MODE_SKIPPED, LAUNCH_ERROR, MISMATCH, OK, SKIPPED, TIMEOUT, AutotuneError,
                     AutotuneResult, ConfigResult)

__all__ = ["AutoTuner", "ProfileArgs"]

log = logging.getLogger("tilecraft.autotuner")
RESULT_FORMAT = 3  # 3: CPU latencies are a low quantile (measure.py), no longer the median


@dataclass(frozen=True)
class ProfileArgs:
    supply_type: TensorSupplyType = TensorSupplyType.Auto
    ref_prog: Callable | None = None
    supply_prog: Callable | None = None
    rtol: float | None = 1e-2
    atol: float | None = 1e-2
    max_mismatched_ratio: float = 0.01
    skip_check: bool = False
    warmup: float = 25
    rep: float = 100
    timeout: float | None = None
    manual_check_prog: Callable | None = None
    cache_input_tensors: bool = True
    flops: float | Callable | None = None
    bytes: float | Callable | None = None
    early_stop: int | None = None  # stop after this many timed configs in a row that beat no best
    # TileLang's early_stop=True: a config whose short probe is slower than this factor times the best
    # so far is not timed in full (it cannot win); None: every config is timed in full
    early_stop_factor: float | None = None

    def key_parts(self) -> tuple:
        """What decides which configs pass (not the timing settings)."""
        return (self.supply_type, self.ref_prog is not None, self.manual_check_prog is not None,
                self.rtol, self.atol, self.max_mismatched_ratio, self.skip_check)


PROBE_MS = 5.0            # the early-stop probe's warmup and timing budget (ms), at most the run's own
DEFAULT_EARLY_STOP_FACTOR = 1.5


def _with_early_stop(pa: ProfileArgs, early_stop, factor) -> ProfileArgs:
    """``run(early_stop=..., early_stop_factor=...)`` applied to the profile arguments."""
    if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor < 1):
        raise ValueError(f"early_stop_factor must be a number >= 1 (a config slower than factor x the best is "
                         f"not timed in full), got {factor!r}")
    if early_stop is None:
        return pa if factor is None else replace(pa, early_stop_factor=float(factor))
    if isinstance(early_stop, bool):
        return replace(pa, early_stop_factor=float(factor or DEFAULT_EARLY_STOP_FACTOR) if early_stop else None)
    if not isinstance(early_stop, int) or early_stop < 1:
        raise ValueError(f"early_stop must be True/False or a positive int, got {early_stop!r}")
    return replace(pa, early_stop=early_stop)


def _excerpt(reason: str | None, max_lines: int = 3, width: int = 160) -> str:
    """The first lines of a failure reason (a compiler error's first line often ends in ':')."""
    lines = [ln.rstrip()[:width] for ln in (reason or "").strip().splitlines() if ln.strip()][:max_lines]
    return "\n      ".join(lines)


def _signature(tensors: Sequence[Any]) -> tuple:
    return tuple((tuple(t.shape), str(t.dtype), t.device.type) if hasattr(t, "shape") else repr(t)
                 for t in tensors)


class AutoTuner:
    """Searches ``configs`` (dicts of keyword arguments) for the fastest correct kernel."""

    def __init__(self, fn: Callable, configs: Sequence[dict] | Callable[..., Sequence[dict]]):
        self.kernel = fn
        self.configs = configs
        self.profile_args = ProfileArgs()
        self._compile_args: dict | None = None
        self._args: tuple = ()
        self._kwargs: dict = {}
        self._inputs: list | None = None
        self._input_sig: tuple | None = None
        self._executor: Any = None

    @classmethod
    def from_kernel(cls, kernel: Callable, configs: Sequence[dict] | Callable[..., Sequence[dict]]) -> "AutoTuner":
        """``kernel``: a ``@tilelang.jit`` factory or a plain function returning a prim_func."""
        return cls(kernel, configs)

    def set_compile_args(self, out_idx: int | list[int] | None = None, target: Any = "auto",
                         pass_configs: dict | None = None, **extra: Any) -> "AutoTuner":
        self._compile_args = {"out_idx": out_idx, "target": target, "pass_configs": pass_configs, **extra}
        return self

    def set_profile_args(self, supply_type: TensorSupplyType = TensorSupplyType.Auto, ref_prog: Callable | None = None,
                         rtol: float | None = 1e-2, atol: float | None = 1e-2, max_mismatched_ratio: float = 0.01,
                         skip_check: bool = False, warmup: float = 25, rep: float = 100, timeout: float | None = None,
                         manual_check_prog: Callable | None = None, cache_input_tensors: bool = True,
                         supply_prog: Callable | None = None, flops: float | Callable | None = None,
                         bytes: float | Callable | None = None,  # noqa: A002 - the user-facing name
                         early_stop: int | bool | None = None, early_stop_factor: float | None = None) -> "AutoTuner":
        """How configs are checked and timed. ``flops``/``bytes`` (numbers, or functions of the
        config) add a TFLOP/s or GB/s column to ``AutotuneResult.table()``. ``early_stop=k`` ends
        the search once k timed configs in a row fail to beat the best so far (configs are tried in
        the order given, so list the likely winners first); the rest are reported as skipped.
        ``early_stop=True`` / ``early_stop_factor``: TileLang's probe-based early stop (``run``)."""
        pa = ProfileArgs(TensorSupplyType(supply_type), ref_prog, supply_prog, rtol, atol,
                         max_mismatched_ratio, skip_check, warmup, rep, timeout,
                         manual_check_prog, cache_input_tensors, flops, bytes)
        self.profile_args = _with_early_stop(pa, early_stop, early_stop_factor)
        return self

    def set_executor(self, executor: Any) -> "AutoTuner":
        """Where ``run()`` compiles and benchmarks: ``"local"``, ``"ray"`` or an executor object."""
        self._executor = executor
        return self

    def set_kernel_parameters(self, args: tuple = (), kwargs: dict | None = None) -> "AutoTuner":
        """The factory's fixed arguments; each config supplies the remaining keyword arguments."""
        self._args, self._kwargs = tuple(args), dict(kwargs or {})
        return self

    # ------------------------------------------------------------------ the run

    def _resolve_configs(self) -> list[dict]:
        configs = self.configs
        if callable(configs):
            try:
                inspect.signature(configs).bind(*self._args, **self._kwargs)
                configs = configs(*self._args, **self._kwargs)
            except TypeError:
                configs = configs()
        configs = list(configs or [])
        if not configs:
            raise ValueError("autotune: the list of configs is empty")
        bad = [c for c in configs if not isinstance(c, dict)]
        if bad:
            raise TypeError(f"autotune: every config must be a dict of keyword arguments, got {bad[0]!r}")
        return configs

    def run(self, warmup: float | None = None, rep: float | None = None, timeout: float | None = None,
            early_stop: bool | int | None = None, early_stop_factor: float | None = None,
            enable_grouped_compile: bool | None = None, executor: Any = None) -> AutotuneResult:
        """Tune and return the best config with its kernel (see the module docstring).

        ``early_stop=True`` (TileLang's): a checked config is first timed with a short probe, and
        one slower than ``early_stop_factor`` (default 1.5) times the best so far is not timed in
        full; an int keeps ``set_profile_args``' meaning (stop after that many configs in a row
        without a new best).  ``enable_grouped_compile``: TileLang compiles the configs in groups;
        tilecraft always compiles them at once in parallel worker processes (step 2), so either
        value gives the same kernels and the same choice.  ``executor``: ``"local"`` (default, or
        ``TILECRAFT_AUTOTUNE_EXECUTOR``), ``"ray"``, or an executor object such as
        ``RayExecutor(address=...)`` (executors.py)."""
        began = time.perf_counter()
        pa = self.profile_args
        pa = replace(pa, warmup=pa.warmup if warmup is None else warmup, rep=pa.rep if rep is None else rep,
                     timeout=pa.timeout if timeout is None else timeout)
        if enable_grouped_compile is not None and not isinstance(enable_grouped_compile, bool):
            raise TypeError(f"enable_grouped_compile must be a bool, got {enable_grouped_compile!r}")
        pa = _with_early_stop(pa, early_stop, early_stop_factor)
        remote = resolve_executor(executor if executor is not None else self._executor)
        configs = self._resolve_configs()
        program = Program(self.kernel, self._args, self._kwargs, self._compile_args)
        user_inputs = current_autotune_inputs()
        self._inputs, self._input_sig = None, None

        db, problem, config_keys = self._database(program, configs, pa, user_inputs)
        known = db.lookup(problem, config_keys) if db is not None else {}
        results = []
        for i, c in enumerate(configs):
            row = known.get(config_keys[i]) if config_keys else None
            results.append(ConfigResult(i, dict(c), **row) if row else ConfigResult(i, dict(c)))
        fresh = [r for r in results if not (config_keys and config_keys[r.index] in known)]
        phase_seconds: dict[str, float] = {}

        measured_best: tuple[ConfigResult, Any, Any, Profiler, list] | None = None
        if fresh and remote is None:
            measured_best = self._run_local(program, configs, results, fresh, pa, user_inputs, phase_seconds)
        elif fresh:
            remote.run(program, configs, fresh, pa, user_inputs)
            phase_seconds.update(getattr(remote, "phase_seconds", {}))
        policy = self._policy(program)
        leaders = runoff_leaders(fresh, policy) if remote is None or hasattr(remote, "runoff") else []
        if leaders:
            t0 = time.perf_counter()
            rounds = (self.runoff(program, leaders, pa, user_inputs) if remote is None
                      else remote.runoff(program, [r.index for r in leaders]))
            settle_runoff(leaders, rounds, policy)
            phase_seconds["runoff"] = time.perf_counter() - t0

        ok = [r for r in results if r.ok]
        if not ok:
            lines = "\n".join(f"  #{r.index} {r.config}: {r.status}: {_excerpt(r.reason)}" for r in results)
            raise AutotuneError(f"autotune {program.name}: all {len(results)} configs failed\n{lines}")
        best_r = choose_best(ok, policy)
        if measured_best is not None and measured_best[0] is best_r:
            _, kernel, func, profiler, inputs = measured_best
        else:  # known from the database, or measured elsewhere: load it here (a compile-cache hit)
            probe = ConfigResult(best_r.index, dict(best_r.config))
            pair = self._compile(program, probe)
            if pair is None:
                if db is not None and best_r not in fresh:  # it compiled when it was tuned: tune again
                    db.forget(problem)
                    return self.run(warmup, rep, timeout, early_stop, early_stop_factor, enable_grouped_compile,
                                    executor=executor)
                raise AutotuneError(f"autotune {program.name}: the best config #{best_r.index} {best_r.config} "
                                    f"was measured but does not compile here: {_excerpt(probe.reason)}")
            kernel, func = pair
            profiler, inputs = None, None

        ref_latency = db.ref_latency(problem) if db is not None else None
        if pa.ref_prog is not None and ref_latency is None and fresh:
            try:
                if remote is not None and profiler is None:
                    ref_latency = remote.reference_latency(program, best_r.index, pa)
                else:
                    if profiler is None:
                        profiler = Profiler(kernel, pa.supply_type)
                        inputs = self._inputs_for(profiler, pa, user_inputs)
                    ref_latency = policy_for(profiler.device_type).latency(
                        profiler.bench_stats(pa.ref_prog, pa.warmup, pa.rep, input_tensors=inputs))
            except Exception as exc:  # the reference's own problem must not lose the tuning result
                log.warning("autotune %s: timing the reference failed: %s", program.name, exc)
        result = AutotuneResult(config=dict(best_r.config), latency=best_r.latency, ref_latency=ref_latency,
                                kernel=kernel, func=func, all_results=results, name=program.name,
                                flops=pa.flops, bytes=pa.bytes, tuning_time=time.perf_counter() - began,
                                from_cache=not fresh, measured=len(fresh),
                                executor=getattr(remote, "name", "local"), phase_seconds=phase_seconds)
        if db is not None and fresh:
            try:
                db.record(problem, self._describe(program, user_inputs),
                          [(config_keys[r.index], r) for r in fresh], ref_latency)
            except Exception as exc:  # never lose a finished tuning run to a storage problem
                log.warning("autotune %s: could not store the results: %s", program.name, exc)
        if env.verbose():
            result.table()
        return result

    def _run_local(self, program: Program, configs: list[dict], results: list[ConfigResult],
                   fresh: list[ConfigResult], pa: ProfileArgs, user_inputs: tuple | None,
                   phase_seconds: dict) -> tuple | None:
        """The local executor: compile ``fresh`` (the first ones here, the rest in forked workers),
        then check and time them one by one in this process. Returns the fastest measured config
        with its kernel, profiler and inputs (or None)."""
        from ..compat.cpu_mode import autotune_configs
        cpu_cap = autotune_configs(len(configs))  # CPU mode: check configs in order until this many pass
        t0 = time.perf_counter()
        built: dict[int, tuple[Any, Any]] = {}
        for r in fresh:  # compile in this process until one works, then fork the rest
            built_ok = self._compile(program, r)
            if built_ok is not None:
                built[r.index] = built_ok
                break
        rest = [r.index for r in fresh if r.index not in built and r.status == OK and r.compile_s is None]
        if rest and not env.cache_disabled() and cpu_cap is None:
            program.prepare()
            outcomes = parallel.precompile(program.precompile, configs, rest, env.autotune_max_workers(), pa.timeout,
                                           desc=f"compiling {program.name}")
            for i, outcome in outcomes.items():
                if outcome.timed_out:
                    results[i].status, results[i].reason = TIMEOUT, outcome.reason
        phase_seconds["compile"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        best: tuple[ConfigResult, Any, Any, Profiler, list] | None = None
        best_latency = min((r.latency for r in results if r.ok), default=None)  # known from the database
        since_best = 0
        passed = sum(1 for r in results if r.ok)  # known from the database
        with tqdm(total=len(fresh), desc=f"autotune {program.name}", disable=None, leave=False) as bar:
            for r in fresh:
                if cpu_cap is not None and passed >= cpu_cap and r.status == OK:
                    r.status, r.reason = CPU_MODE_SKIPPED, (f"CPU mode checks configs until {cpu_cap} pass "
                                                            f"(TILECRAFT_CPU_AUTOTUNE_CONFIGS)")
                elif pa.early_stop is not None and since_best >= pa.early_stop and r.status == OK:
                    r.status, r.reason = SKIPPED, f"{since_best} configs in a row did not beat the best"
                elif r.status == OK:
                    pair = built.pop(r.index, None) or self._compile(program, r)
                    if pair is not None:
                        kernel, func = pair
                        evaluated = self._evaluate(r, kernel, pa, user_inputs, best_latency)
                        if evaluated is not None:
                            passed += 1
                            if best is None or r.latency < best[0].latency:
                                best = (r, kernel, func, *evaluated)
                            if best_latency is None or r.latency < best_latency:
                                best_latency, since_best = r.latency, 0
                            else:
                                since_best += 1
                bar.update(1)
        phase_seconds["benchmark"] = time.perf_counter() - t0
        return best

    def runoff(self, program: Program, leaders: Sequence[ConfigResult], pa: ProfileArgs,
               user_inputs: tuple | None) -> dict[int, list[list[float]]]:
        """The runoff's samples (ms) per leader's index, one list per round, timed here: every leader
        is loaded (a compile-cache hit), then the policy's rounds (measure.py) time each once, in an
        order that rotates. A leader that fails now keeps its first measurement."""
        timed = []
        for r in leaders:
            pair = self._compile(program, ConfigResult(r.index, dict(r.config)))
            if pair is not None:
                profiler = Profiler(pair[0], pa.supply_type)
                timed.append((r.index, profiler, self._inputs_for(profiler, pa, user_inputs)))
        if not timed:
            return {}
        policy = policy_for(timed[0][1].device_type)
        samples: dict[int, list[list[float]]] = {index: [] for index, _, _ in timed}
        failed: set[int] = set()
        for k in range(policy.runoff_rounds):
            for index, profiler, inputs in timed[k % len(timed):] + timed[:k % len(timed)]:
                if index in failed:
                    continue
                try:
                    samples[index].append(list(profiler.bench_stats(
                        warmup=pa.warmup * policy.round_warmup_share, rep=pa.rep * policy.round_share,
                        input_tensors=inputs).times))
                except Exception as exc:  # it ran before: keep that measurement
                    log.warning("autotune %s: the runoff could not time config #%d: %s", program.name, index, exc)
                    failed.add(index)
        return {index: times for index, times in samples.items() if index not in failed}

    # ------------------------------------------------------------------ one config

    @staticmethod
    def _policy(program: Program) -> MeasurePolicy:
        """The measure policy of the device this run's kernels are timed on (the resolved target's)."""
        if getattr(program, "_target", None) is None:
            program.prepare()
        target = getattr(program, "_target", None)
        if target is not None:
            return policy_for(target.device_type)
        from ..target import cuda_available
        return policy_for("cuda" if cuda_available() else "cpu")

    def _compile(self, program: Program, r: ConfigResult) -> tuple[Any, Any] | None:
        t0 = time.perf_counter()
        try:
            pair = program.compile(r.config)
        except Exception as exc:
            r.status, r.reason = COMPILE_ERROR, parallel.describe_exception(exc)
            pair = None
        r.compile_s = time.perf_counter() - t0
        return pair

    def _inputs_for(self, profiler: Profiler, pa: ProfileArgs, user_inputs: tuple | None) -> list:
        wanted = len(profiler.input_params)
        if user_inputs is not None:
            if len(user_inputs) != wanted:
                names = [getattr(p, "name", "?") for p in profiler.input_params]
                raise ValueError(f"set_autotune_inputs: got {len(user_inputs)} tensors but kernel "
                                 f"{profiler.name!r} takes {wanted} inputs {names}")
            return list(user_inputs)
        sig = (profiler.device_type, tuple((tuple(p.shape), p.dtype) for p in profiler.input_params))
        if pa.cache_input_tensors and self._inputs is not None and self._input_sig == sig:
            return self._inputs
        inputs = list(pa.supply_prog(supply_params(profiler.input_params))) if pa.supply_prog else profiler.supply()
        if pa.cache_input_tensors:
            self._inputs, self._input_sig = inputs, sig
        return inputs

    def _evaluate(self, r: ConfigResult, kernel: Any, pa: ProfileArgs, user_inputs: tuple | None,
                  best: float | None = None) -> tuple[Profiler, list] | None:
        """Check and time one compiled config; on failure record why and return None.  With
        ``pa.early_stop_factor`` and a best latency so far, a short probe slower than factor x best
        ends the timing there: the config is recorded as skipped, with the probe's latency."""
        profiler = Profiler(kernel, pa.supply_type)
        policy = policy_for(profiler.device_type)
        inputs = self._inputs_for(profiler, pa, user_inputs)  # a ValueError here is the user's mistake
        stage = LAUNCH_ERROR
        try:
            if pa.timeout is not None:
                t0 = time.perf_counter()
                kernel(*inputs)
                _sync(profiler.device_type)
                if time.perf_counter() - t0 > pa.timeout:
                    r.status, r.reason = TIMEOUT, f"one call took longer than {pa.timeout:g} s"
                    return None
            if not pa.skip_check and (pa.ref_prog is not None or pa.manual_check_prog is not None):
                stage = MISMATCH
                ref = pa.ref_prog if pa.ref_prog is not None else (lambda *args: None)
                profiler.assert_allclose(ref, pa.rtol, pa.atol, pa.max_mismatched_ratio, input_tensors=inputs,
                                         manual_check_prog=pa.manual_check_prog)
                stage = LAUNCH_ERROR
            if pa.early_stop_factor is not None and best is not None:
                probe = profiler.bench_stats(warmup=min(pa.warmup, PROBE_MS), rep=min(pa.rep, PROBE_MS),
                                             input_tensors=inputs)
                if policy.latency(probe) > pa.early_stop_factor * best:
                    r.status, r.latency, r.stats = SKIPPED, policy.latency(probe), probe.as_dict()
                    r.reason = (f"early stop: a short probe took {r.latency:.4g} ms, over "
                                f"{pa.early_stop_factor:g} x the best so far ({best:.4g} ms)")
                    return None
            stats = profiler.bench_stats(warmup=pa.warmup, rep=pa.rep, input_tensors=inputs)
        except AssertionError as exc:
            r.status, r.reason = (MISMATCH if stage == MISMATCH else LAUNCH_ERROR), str(exc) or "assertion failed"
            return None
        except Exception as exc:
            r.status, r.reason = LAUNCH_ERROR, parallel.describe_exception(exc)
            return None
        r.status, r.latency, r.stats = OK, policy.latency(stats), stats.as_dict()
        return profiler, inputs

    # ------------------------------------------------------------------ the tuning database

    def _database(self, program: Program, configs: list[dict], pa: ProfileArgs,
                  user_inputs: tuple | None) -> tuple[TuningDatabase | None, str | None, list[str]]:
        """(the database, this problem's key, each config's key), or (None, None, []) when results
        are not stored (the knob, or an argument or config that cannot be keyed)."""
        if env.autotune_cache_disabled():
            return None, None, []
        try:
            problem = cache_key("autotune", RESULT_FORMAT, program.key_parts(), pa.key_parts(),
                                _signature(user_inputs) if user_inputs is not None else None,
                                compiler_version_hash())
            keys = [cache_key(c) for c in configs]
        except TypeError as exc:  # an argument or config we cannot key: tune, but do not store
            log.info("autotune %s: results not stored (%s)", program.name, exc)
            return None, None, []
        return TuningDatabase(), problem, keys

    @staticmethod
    def _describe(program: Program, user_inputs: tuple | None) -> dict:
        """The readable columns of a problem's row."""
        args = ", ".join([repr(a) for a in program.args] + [f"{k}={v!r}" for k, v in program.kwargs.items()])
        if user_inputs is not None:
            args += f"; inputs {_signature(user_inputs)!r}"
        target = program.compile_args.get("target")
        return {"name": program.name, "arguments": args, "target": str(target),
                "hardware": repr(program.key_parts()[-1]), "compiler": compiler_version_hash()}


def supply_params(params) -> list:
    """The parameters a `supply_prog` receives: TileLang's, whose `.dtype` is a tilelang dtype
    (`param.dtype.as_torch()` gives the torch one) and `.shape` the sizes; the profiler's own
    parameter records keep torch dtypes."""
    import dataclasses
    out = []
    for p in params:
        ir = getattr(p, "ir_dtype", None)
        out.append(dataclasses.replace(p, dtype=ir) if ir is not None and dataclasses.is_dataclass(p) else p)
    return out

"""``AutoTuner``: compile every config (in parallel), check it, time it, keep the fastest.

A run goes:
1. A stored result for the same program, arguments, configs, target, machine, check settings
   and compiler version (``compiler_version_hash()``) is returned at once: only the best config
   is compiled again (a cache hit), nothing is benchmarked.
2. The first config(s) are compiled in this process until one succeeds (this resolves
   ``target="auto"`` and warms up imports once), then the rest are compiled by forked workers
   (``parallel.precompile``) purely to fill the disk cache.
3. Config by config, in this process: compile (now a cache hit), check against ``ref_prog``
   (or ``manual_check_prog``) on the same inputs, time with the profiler. A config that fails
   to compile, to launch, or to match is recorded with its reason and skipped.  With
   ``early_stop=True`` (``early_stop_factor=f``) a checked config is first timed briefly; one
   slower than f times the best so far is recorded with that time and not timed in full.
4. The reference is timed on the best config's inputs, the result is stored on disk.

The latency of a config is the median of its samples (robust to the odd slow repetition).
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from tqdm.auto import tqdm

from .. import env
from ..compiler.cache import DiskCache, cache_key, compiler_version_hash
from ..profiler import Profiler, TensorSupplyType
from ..profiler.profiler import _sync
from . import parallel
from .inputs import current_autotune_inputs
from .program import Program
from .result import (COMPILE_ERROR, LAUNCH_ERROR, MISMATCH, OK, SKIPPED, TIMEOUT, AutotuneError, AutotuneResult,
                     ConfigResult)

__all__ = ["AutoTuner", "ProfileArgs"]

log = logging.getLogger("tilecraft.autotuner")
RESULT_FORMAT = 1


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
            enable_grouped_compile: bool | None = None) -> AutotuneResult:
        """Tune and return the best config with its kernel (see the module docstring).

        ``early_stop=True`` (TileLang's): a checked config is first timed with a short probe, and
        one slower than ``early_stop_factor`` (default 1.5) times the best so far is not timed in
        full; an int keeps ``set_profile_args``' meaning (stop after that many configs in a row
        without a new best).  ``enable_grouped_compile``: TileLang compiles the configs in groups;
        tilecraft always compiles them at once in parallel worker processes (step 2), so either
        value gives the same kernels and the same choice."""
        began = time.perf_counter()
        pa = self.profile_args
        pa = replace(pa, warmup=pa.warmup if warmup is None else warmup, rep=pa.rep if rep is None else rep,
                     timeout=pa.timeout if timeout is None else timeout)
        if enable_grouped_compile is not None and not isinstance(enable_grouped_compile, bool):
            raise TypeError(f"enable_grouped_compile must be a bool, got {enable_grouped_compile!r}")
        pa = _with_early_stop(pa, early_stop, early_stop_factor)
        configs = self._resolve_configs()
        program = Program(self.kernel, self._args, self._kwargs, self._compile_args)
        user_inputs = current_autotune_inputs()
        self._inputs, self._input_sig = None, None

        store, key = self._result_store(program, configs, pa, user_inputs)
        if key is not None:
            cached = self._from_cache(store, key, program, configs, pa)
            if cached is not None:
                cached.tuning_time = time.perf_counter() - began
                return cached

        results = [ConfigResult(i, dict(c)) for i, c in enumerate(configs)]
        built: dict[int, tuple[Any, Any]] = {}
        for r in results:  # compile in this process until one works, then fork the rest
            built_ok = self._compile(program, r)
            if built_ok is not None:
                built[r.index] = built_ok
                break
        rest = [r.index for r in results if r.index not in built and r.status == OK]
        if rest and not env.cache_disabled():
            program.prepare()
            outcomes = parallel.precompile(program.precompile, configs, rest, env.autotune_max_workers(), pa.timeout,
                                           desc=f"compiling {program.name}")
            for i, outcome in outcomes.items():
                if outcome.timed_out:
                    results[i].status, results[i].reason = TIMEOUT, outcome.reason

        best: tuple[ConfigResult, Any, Any, Profiler, list] | None = None
        since_best = 0
        with tqdm(total=len(results), desc=f"autotune {program.name}", disable=None, leave=False) as bar:
            for r in results:
                if pa.early_stop is not None and since_best >= pa.early_stop and r.status == OK:
                    r.status, r.reason = SKIPPED, f"{since_best} configs in a row did not beat the best"
                elif r.status == OK:
                    pair = built.pop(r.index, None) or self._compile(program, r)
                    if pair is not None:
                        kernel, func = pair
                        evaluated = self._evaluate(r, kernel, pa, user_inputs, best[0].latency if best else None)
                        if evaluated is not None:
                            if best is None or r.latency < best[0].latency:
                                best = (r, kernel, func, *evaluated)
                                since_best = 0
                            else:
                                since_best += 1
                bar.update(1)
        if best is None:
            lines = "\n".join(f"  #{r.index} {r.config}: {r.status}: {_excerpt(r.reason)}" for r in results)
            raise AutotuneError(f"autotune {program.name}: all {len(results)} configs failed\n{lines}")

        best_r, kernel, func, profiler, inputs = best
        ref_latency = None
        if pa.ref_prog is not None:
            try:
                ref_latency = profiler.bench_stats(pa.ref_prog, pa.warmup, pa.rep, input_tensors=inputs).median
            except Exception as exc:  # the reference's own problem must not lose the tuning result
                log.warning("autotune %s: timing the reference failed: %s", program.name, exc)
        result = AutotuneResult(config=dict(best_r.config), latency=best_r.latency, ref_latency=ref_latency,
                                kernel=kernel, func=func, all_results=results, name=program.name,
                                flops=pa.flops, bytes=pa.bytes, tuning_time=time.perf_counter() - began)
        if key is not None:
            self._store(store, key, result, configs)
        if env.verbose():
            result.table()
        return result

    # ------------------------------------------------------------------ one config

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
        inputs = list(pa.supply_prog(profiler.input_params)) if pa.supply_prog else profiler.supply()
        if pa.cache_input_tensors:
            self._inputs, self._input_sig = inputs, sig
        return inputs

    def _evaluate(self, r: ConfigResult, kernel: Any, pa: ProfileArgs, user_inputs: tuple | None,
                  best: float | None = None) -> tuple[Profiler, list] | None:
        """Check and time one compiled config; on failure record why and return None.  With
        ``pa.early_stop_factor`` and a best latency so far, a short probe slower than factor x best
        ends the timing there: the config is recorded as skipped, with the probe's latency."""
        profiler = Profiler(kernel, pa.supply_type)
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
                if probe.median > pa.early_stop_factor * best:
                    r.status, r.latency, r.stats = SKIPPED, probe.median, probe.as_dict()
                    r.reason = (f"early stop: a short probe took {probe.median:.4g} ms, over "
                                f"{pa.early_stop_factor:g} x the best so far ({best:.4g} ms)")
                    return None
            stats = profiler.bench_stats(warmup=pa.warmup, rep=pa.rep, input_tensors=inputs)
        except AssertionError as exc:
            r.status, r.reason = (MISMATCH if stage == MISMATCH else LAUNCH_ERROR), str(exc) or "assertion failed"
            return None
        except Exception as exc:
            r.status, r.reason = LAUNCH_ERROR, parallel.describe_exception(exc)
            return None
        r.status, r.latency, r.stats = OK, stats.median, stats.as_dict()
        return profiler, inputs

    # ------------------------------------------------------------------ the stored result

    def _result_store(self, program: Program, configs: list[dict], pa: ProfileArgs,
                      user_inputs: tuple | None) -> tuple[DiskCache, str | None]:
        store = DiskCache("autotune")
        if env.autotune_cache_disabled():
            return store, None
        try:
            key = cache_key("autotune", RESULT_FORMAT, program.key_parts(), configs, pa.key_parts(),
                            _signature(user_inputs) if user_inputs is not None else None, compiler_version_hash())
        except TypeError as exc:  # an argument or config we cannot key: tune, but do not store
            log.info("autotune %s: result not cached (%s)", program.name, exc)
            return store, None
        return store, key

    def _from_cache(self, store: DiskCache, key: str, program: Program, configs: list[dict],
                    pa: ProfileArgs) -> AutotuneResult | None:
        entry = store.get(key)
        if entry is None:
            return None
        try:
            doc = json.loads(entry.read_text("result.json"))
            best = int(doc["best_index"])
            if doc["best_config_key"] != cache_key(configs[best]):
                return None
            results = [ConfigResult(d["index"], dict(configs[d["index"]]), d["status"], d["latency"], d["stats"],
                                    d["reason"], d["compile_s"]) for d in doc["results"]]
        except (ValueError, KeyError, IndexError, TypeError):
            store.remove(key)
            return None
        r = ConfigResult(best, dict(configs[best]))
        pair = self._compile(program, r)
        if pair is None:  # it compiled when it was tuned; something changed, so tune again
            store.remove(key)
            return None
        return AutotuneResult(config=dict(configs[best]), latency=doc["latency"], ref_latency=doc["ref_latency"],
                              kernel=pair[0], func=pair[1], all_results=results, from_cache=True,
                              name=program.name, flops=pa.flops, bytes=pa.bytes)

    def _store(self, store: DiskCache, key: str, result: AutotuneResult, configs: list[dict]) -> None:
        best = next(r.index for r in result.all_results if r.ok and r.latency == result.latency
                    and r.config == result.config)
        doc = {"format": RESULT_FORMAT, "best_index": best, "best_config_key": cache_key(configs[best]),
               "latency": result.latency, "ref_latency": result.ref_latency,
               "results": [r.to_json() for r in result.all_results]}
        try:
            store.put(key, {"result.json": json.dumps(doc, default=repr)},
                      {"name": result.name, "best_index": best, "latency": result.latency})
        except Exception as exc:  # never lose a finished tuning run to a storage problem
            log.warning("autotune %s: could not store the result: %s", result.name, exc)

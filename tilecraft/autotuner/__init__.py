"""Autotuning: search configs of a kernel factory for the fastest kernel that gives right answers.

Two spellings, as in TileLang::

    result = (AutoTuner.from_kernel(matmul, configs)
              .set_compile_args(out_idx=[-1], target="auto")
              .set_profile_args(ref_prog=lambda a, b: a @ b, warmup=10, rep=50)
              .run())
    result.table(); result.kernel(a, b)

    @autotune(configs=configs, warmup=10, rep=50)
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, ...): ...

Configs compile in parallel processes into the shared disk cache (or, with ``executor="ray"``,
on a Ray cluster: ray_executor.py); failures are reported and skipped; every measured config is
kept in the tuning database (database.py; ``TILECRAFT_AUTO_TUNING_DISABLE_CACHE=1`` turns that
off), so a later run benchmarks only what it does not know. ``tune_many`` (sweep.py, and
``tilecraft tune``) tunes one factory for many shapes.
"""

from __future__ import annotations

import importlib

# name -> the module defining it, imported on first use: a Ray worker that only compiles imports
# ``ray_executor`` (and so this package) without the tuner, the profiler and torch (seconds of start-up
# per worker process); ``RayExecutor`` also needs ray itself, an optional dependency ('scale' extra)
_EXPORTS = {
    "TensorSupplyType": "..profiler", "TuningDatabase": ".database", "AutoTuneImpl": ".decorator",
    "autotune": ".decorator", "current_autotune_inputs": ".inputs", "set_autotune_inputs": ".inputs",
    "AutotuneError": ".result", "AutotuneResult": ".result", "ConfigResult": ".result", "SweepReport": ".sweep",
    "tune_many": ".sweep", "AutoTuner": ".tuner", "ProfileArgs": ".tuner", "RayExecutor": ".ray_executor",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))

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

from ..profiler import TensorSupplyType
from .database import TuningDatabase
from .decorator import AutoTuneImpl, autotune
from .inputs import current_autotune_inputs, set_autotune_inputs
from .result import AutotuneError, AutotuneResult, ConfigResult
from .sweep import SweepReport, tune_many
from .tuner import AutoTuner, ProfileArgs

__all__ = [
    "AutoTuneImpl", "AutoTuner", "AutotuneError", "AutotuneResult", "ConfigResult", "ProfileArgs",
    "RayExecutor", "SweepReport", "TensorSupplyType", "TuningDatabase", "autotune", "current_autotune_inputs",
    "set_autotune_inputs", "tune_many",
]


def __getattr__(name):
    if name == "RayExecutor":  # imported on first use: ray itself is optional ('scale' extra)
        from .ray_executor import RayExecutor
        return RayExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

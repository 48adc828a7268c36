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

Configs compile in parallel processes into the shared disk cache; failures are reported and
skipped; results are stored on disk (``TILECRAFT_AUTO_TUNING_DISABLE_CACHE=1`` turns that off).
"""

from ..profiler import TensorSupplyType
from .decorator import AutoTuneImpl, autotune
from .inputs import current_autotune_inputs, set_autotune_inputs
from .result import AutotuneError, AutotuneResult, ConfigResult
from .tuner import AutoTuner, ProfileArgs

__all__ = [
    "AutoTuneImpl", "AutoTuner", "AutotuneError", "AutotuneResult", "ConfigResult", "ProfileArgs",
    "TensorSupplyType", "autotune", "current_autotune_inputs", "set_autotune_inputs",
]

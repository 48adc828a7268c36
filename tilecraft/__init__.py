"""tilecraft: a tile-level GPU kernel language and compiler.

Programs written for TileLang's classic API run unchanged after
`import tilecraft as tilelang; import tilecraft.language as T`.
"""
__version__ = "0.1.0"

from .runtime.openmp import load_openmp as _load_openmp
_load_openmp()   # before torch, where it can: torch and the CPU kernels share libgomp and its wait policy

from . import language
from .errors import TilecraftError, CompileError
from .jit import jit, compile, JITFactory
from .options import PassConfigKey, Options
from . import math
from .math import cdiv, next_power_of_2
from .runtime.kernel import JITKernel
from .target import Target
from .device import include_dir
from . import env
from .env import disable_cache, enable_cache, is_cache_enabled

if env.knobs.run_on_cpu:  # TILECRAFT_RUN_ON_CPU=1: a program written for CUDA runs on the CPU target
    from .compat import cpu_mode as _cpu_mode
    _cpu_mode.install()


def set_log_level(level) -> None:
    """TileLang's `tilelang.set_log_level("INFO")`: the level of tilecraft's loggers (a name or a number)."""
    import logging
    lv = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(lv, int):
        raise ValueError(f"set_log_level: unknown level {level!r}")
    for name in ("tilecraft", "tilelang"):
        logging.getLogger(name).setLevel(lv)


def __getattr__(name):
    # Heavier pieces load on first use so `import tilecraft` stays fast.
    if name in ("testing", "utils", "layout", "compat"):
        import importlib
        return importlib.import_module("." + name, __name__)
    if name in ("tvm", "tools", "tileop", "cuda", "transform"):
        import importlib
        return importlib.import_module("." + name, __name__)
    if name == "DataType":
        from .ir.dtype import dtype
        return dtype
    if name == "profiler":
        import importlib
        return importlib.import_module(".profiler", __name__)
    if name in ("TensorSupplyType", "Profiler"):
        from . import profiler
        return getattr(profiler, name)
    if name in ("autotune", "AutoTuner"):
        from . import autotuner
        return getattr(autotuner, name)
    if name == "autotuner":
        import importlib
        return importlib.import_module(".autotuner", __name__)
    raise AttributeError(f"module 'tilecraft' has no attribute {name!r}")

"""Where a tuning run compiles and benchmarks its configs: the executors, chosen by name.

- ``local`` (default): this process and forked workers on this machine (``parallel.py``); configs
  are benchmarked here, one after another.
- ``ray``: a Ray cluster (``ray_executor.py``): compile tasks on CPU workers, benchmark tasks pinned
  one per GPU (``num_gpus=1``; the CPU target's benchmark tasks take a whole node's CPUs, so two
  never time each other, and time with this process's thread count, as the local executor does),
  the best config loaded here. ``ray.init()`` local by default,
  ``address=`` (or ``TILECRAFT_RAY_ADDRESS``) for a cluster.

``AutoTuner.run(executor=...)``, ``@autotune(executor=...)`` and ``TILECRAFT_AUTOTUNE_EXECUTOR``
take a name or an executor object (``RayExecutor(address=..., num_cpus=...)``). Both give the
same ``AutotuneResult`` (the same table, the same best config for the same timings).
"""

from __future__ import annotations

from typing import Any

from .. import env

__all__ = ["EXECUTORS", "resolve_executor"]


def _local() -> Any:
    return None  # the tuner's own in-process path (parallel.precompile + the evaluation loop)


def _ray() -> Any:
    from .ray_executor import RayExecutor
    return RayExecutor()


EXECUTORS = {"local": _local, "ray": _ray}


def resolve_executor(executor: Any) -> Any:
    """None for the local executor, else an object with ``run(tuner, program, results, pa, inputs)``."""
    if executor is None:
        executor = env.autotune_executor()
    if isinstance(executor, str):
        make = EXECUTORS.get(executor.strip().lower())
        if make is None:
            raise ValueError(f"autotune: unknown executor {executor!r}; expected one of {sorted(EXECUTORS)} "
                             "or an executor object such as RayExecutor(address=...)")
        return make()
    if not callable(getattr(executor, "run", None)):
        raise TypeError(f"autotune: executor must be a name ({sorted(EXECUTORS)}) or an executor object, "
                        f"got {type(executor).__name__}")
    return executor

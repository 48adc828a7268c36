"""Test helpers with TileLang's meaning (`tilelang.testing`).

- `main()`: run the calling test file under pytest (`python test_x.py` runs its tests).
- `requires_cuda`, `requires_cuda_compute_version[_ge|_gt|_le|_lt|_eq](major, minor=0)`,
  `requires_package(*names)`, `requires_rocm/_metal/_llvm`: pytest skip marks; the decorated
  function is unchanged when called directly (the example files call them from `main()` too).
- `set_random_seed(seed=42)`: Python, NumPy and torch (CPU and every GPU).
- `process_func(fn, name=None, **kwargs)` / `regression(prefixes=("regression_",))`: the
  performance-regression harness of TileLang's example folders: `regression()` calls every
  `regression_*` function of the caller's module in name order; each calls `process_func` on an
  example's `run_regression_perf`, whose return value (a latency) is recorded; at the end one line
  `name: latency` per result is printed (`TL_PERF_REGRESSION_FORMAT=json`: one JSON line).
- `torch_assert_close`: see `tilecraft.utils.tensor`.
"""
from __future__ import annotations

import inspect
import json
import os
import random
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from ..utils.tensor import torch_assert_close

__all__ = ["main", "set_random_seed", "requires_cuda", "requires_package", "requires_rocm", "requires_metal",
           "requires_llvm", "requires_cuda_compute_version", "process_func", "regression", "torch_assert_close",
           "PerfResult"] + [f"requires_cuda_compute_version_{op}" for op in ("ge", "gt", "le", "lt", "eq")]


def main():
    """`pytest` on the calling file, with this process's extra command-line arguments; exits with
    pytest's status."""
    import pytest
    test_file = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([test_file] + sys.argv[1:]))


def set_random_seed(seed: int = 42) -> None:
    import numpy as np
    import torch
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


# ---- skip marks ----------------------------------------------------------------------------

def _cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available() and getattr(torch.version, "hip", None) is None
    except ImportError:
        return False


def _compute_version() -> tuple[int, int]:
    """(major, minor) of the current CUDA device, (0, 0) without one."""
    if not _cuda_available():
        return (0, 0)
    import torch
    return tuple(torch.cuda.get_device_capability())


def _mark(condition: bool, reason: str) -> Callable:
    """A decorator adding `pytest.mark.skipif(condition)` (a no-op without pytest installed)."""
    def deco(func):
        try:
            import pytest
        except ImportError:
            return func
        return pytest.mark.skipif(condition, reason=reason)(func)
    return deco


def requires_cuda(func):
    return _mark(not _cuda_available(), "requires a CUDA device")(func)


def requires_rocm(func):
    import torch
    return _mark(getattr(torch.version, "hip", None) is None or not torch.cuda.is_available(),
                 "requires a ROCm device")(func)


def requires_metal(func):
    return _mark(True, "tilecraft has no Metal target")(func)


def requires_llvm(func):
    return _mark(True, "tilecraft has no LLVM target")(func)


def requires_package(*packages):
    """Skip unless every named package imports."""
    import importlib.util
    missing = [p for p in packages if importlib.util.find_spec(p) is None]

    def deco(func):
        return _mark(bool(missing), f"requires the package(s) {', '.join(missing)}")(func)
    return deco


_COMPARE = {"ge": lambda a, b: a >= b, "gt": lambda a, b: a > b, "le": lambda a, b: a <= b,
            "lt": lambda a, b: a < b, "eq": lambda a, b: a == b}


def requires_cuda_compute_version(major_version, minor_version=0, mode="ge"):
    """Skip unless a CUDA device is present and its compute capability compares `mode`
    (ge, gt, le, lt, eq) with (major_version, minor_version)."""
    if mode not in _COMPARE:
        raise ValueError(f"requires_cuda_compute_version: mode must be one of {', '.join(_COMPARE)}, got {mode!r}")
    want, have = (major_version, minor_version), _compute_version()

    def deco(func):
        func = _mark(not _COMPARE[mode](have, want),
                     f"requires CUDA compute {mode} {want[0]}.{want[1]}, have {have[0]}.{have[1]}")(func)
        return requires_cuda(func)
    return deco


def requires_cuda_compute_version_ge(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "ge")


def requires_cuda_compute_version_gt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "gt")


def requires_cuda_compute_version_le(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "le")


def requires_cuda_compute_version_lt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "lt")


def requires_cuda_compute_version_eq(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "eq")


# ---- performance regression harness ---------------------------------------------------------

@dataclass(frozen=True)
class PerfResult:
    name: str
    latency: float


RESULTS: list[PerfResult] = []
_RETRIES = 5


def process_func(func: Callable[..., Any], name: str | None = None, /, **kwargs: Any) -> PerfResult | None:
    """Call `func(**kwargs)` (an example's `run_regression_perf`) and record the latency it returns
    under `name` (default: the function's module without a `regression_` prefix).  A latency <= 0
    is retried a few times, then warned about and not recorded."""
    label = name or getattr(func, "__module__", None) or "<unknown>"
    if label.startswith("regression_"):
        label = label[len("regression_"):]
    latency = float(func(**kwargs))
    for _ in range(_RETRIES):
        if latency > 0:
            break
        latency = float(func(**kwargs))
    if latency <= 0:
        warnings.warn(f"{label}: latency {latency} <= 0; check the profiling", RuntimeWarning, stacklevel=2)
        return None
    result = PerfResult(label, latency)
    RESULTS.append(result)
    return result


def regression(prefixes=("regression_",)) -> list[PerfResult]:
    """Run every callable named `<prefix>*` in the caller's module (sorted by name), then print the
    recorded latencies."""
    caller = sys._getframe(1).f_globals
    RESULTS.clear()
    for _, fn in sorted((k, v) for k, v in list(caller.items())
                        if callable(v) and any(k.startswith(p) for p in prefixes)):
        fn()
    if os.environ.get("TL_PERF_REGRESSION_FORMAT", "text").strip().lower() == "json":
        print("__TILELANG_PERF_RESULTS_JSON__=" + json.dumps([{"name": r.name, "latency": r.latency}
                                                              for r in RESULTS], separators=(",", ":")))
    else:
        for r in RESULTS:
            print(f"{r.name}: {r.latency}")
    return list(RESULTS)

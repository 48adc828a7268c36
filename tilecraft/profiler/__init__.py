"""Profiling tools: synthetic inputs, timing and correctness checks for compiled kernels.

``Profiler(kernel, supply_type)`` is what ``kernel.get_profiler()`` returns; ``do_bench(fn)``
times any zero-argument callable with the same method (CUDA events with an L2 flush between
calls on a GPU, ``perf_counter`` on the CPU).
"""

from .bench import BenchStats, measure, summarize
from .bench import do_bench as _do_bench
from .compare import default_tolerances, mismatch_report
from .profiler import Profiler
from .supply import TensorSupplyType, get_tensor_supply

__all__ = [
    "BenchStats", "Profiler", "TensorSupplyType", "default_tolerances", "do_bench", "get_tensor_supply",
    "measure", "mismatch_report", "summarize",
]


_BACKENDS = ("event", "cupti", "cudagraph", "cpu")
_WARNED: set = set()


def do_bench(fn, warmup=25, rep=100, _n_warmup=0, _n_repeat=0, quantiles=None, fast_flush=True,
             backend="event", return_mode="mean", **kwargs):
    """Milliseconds per call of `fn()` (TileLang's standalone `do_bench`, built on
    `bench.do_bench`).  `backend`: "event" (CUDA events), "cudagraph" (events around a captured
    graph); "cupti" (a kernel-only CUPTI trace in TileLang) is timed with CUDA events and says so once;
    "cpu" uses the host clock.  `_n_warmup`/`_n_repeat` (> 0) fix the counts; `fast_flush`
    selects the L2 flush between runs.  Other keywords go to `bench.do_bench`."""
    if backend not in _BACKENDS:
        raise ValueError(f"do_bench: backend must be one of {', '.join(_BACKENDS)}, got {backend!r}")
    if backend == "cupti" and "cupti" not in _WARNED:
        import warnings
        from ..options import UnhonouredOptionWarning
        _WARNED.add("cupti")
        warnings.warn("do_bench(backend='cupti'): tilecraft times with CUDA events (launch overhead "
                      "included) instead of a CUPTI kernel trace", UnhonouredOptionWarning, stacklevel=2)
    kwargs.setdefault("n_warmup", _n_warmup or kwargs.get("n_warmup") or None)
    kwargs.setdefault("n_repeat", _n_repeat or kwargs.get("n_repeat") or None)
    if backend == "cudagraph":
        kwargs.setdefault("cuda_graph", True)
    if backend == "cpu":
        kwargs.setdefault("device", "cpu")
    kwargs.setdefault("flush_l2", bool(fast_flush))
    return _do_bench(fn, warmup=warmup, rep=rep, quantiles=quantiles, return_mode=return_mode, **kwargs)

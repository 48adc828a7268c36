"""Profiling tools: synthetic inputs, timing and correctness checks for compiled kernels.

``Profiler(kernel, supply_type)`` is what ``kernel.get_profiler()`` returns; ``do_bench(fn)``
times any zero-argument callable with the same method (CUDA events with an L2 flush between
calls on a GPU, ``perf_counter`` on the CPU).
"""

from .bench import BenchStats, do_bench, measure, summarize
from .compare import default_tolerances, mismatch_report
from .profiler import Profiler
from .supply import TensorSupplyType, get_tensor_supply

__all__ = [
    "BenchStats", "Profiler", "TensorSupplyType", "default_tolerances", "do_bench", "get_tensor_supply",
    "measure", "mismatch_report", "summarize",
]

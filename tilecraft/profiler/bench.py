"""Timing: ``do_bench`` (a number in ms) and ``measure`` (every sample, as ``BenchStats``).

The method is triton's ``do_bench``: ``warmup`` and ``rep`` are milliseconds of work, not
iteration counts. A few calls estimate the time of one call; the iteration counts follow from it
(``n_warmup``/``n_repeat`` override). Every repetition is timed on its own so that the median and
quantiles are meaningful.

- CUDA: a pair of ``torch.cuda.Event``s around each call on the current stream. Before each call
  the L2 is flushed so that the kernel starts cold (H100/H200 have 50-60 MB of L2; without the
  flush a kernel re-reading its inputs looks faster than it will in a model).  ``flush_l2=True``
  (or ``"clean"``) reads a 256 MB buffer: L2 ends up holding clean, unrelated lines.
  ``flush_l2="dirty"`` zeroes the buffer instead (triton's method): L2 ends up full of dirty
  lines, and the timed kernel also pays for writing them back to DRAM -- on an H200 about 2.4 us,
  i.e. a 32 MiB copy measures 3.25 TB/s instead of 3.66 TB/s (benchmarks/membw_probe.py).  The
  clean flush times the kernel's own traffic; the dirty one is kept for comparisons.
  ``cuda_graph=True`` captures one call in a CUDA graph and times its replay, which removes the
  host launch overhead from small kernels.
- CPU: ``time.perf_counter`` around each call; there is no cache flush.  The counts follow from
  the fastest of (at least 2) estimate calls: another job's time slice stalls a call, never speeds
  it.  In CPU mode (a GPU
  program on the CPU target) the counts are bounded: ``cpu_mode.bench_reps``.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

__all__ = ["BenchStats", "summarize", "measure", "do_bench", "L2_FLUSH_BYTES"]

L2_FLUSH_BYTES = 256 * 1024 * 1024
RETURN_MODES = ("mean", "median", "min", "max", "all")
_MAX_ITERATIONS = 1_000_000
_ESTIMATE_CALLS = 5


@dataclass(frozen=True)
class BenchStats:
    """The samples of one measurement (ms per call) and the statistics drawn from them."""

    times: tuple[float, ...]

    def __post_init__(self):
        if not self.times:
            raise ValueError("BenchStats needs at least one sample")

    @property
    def n(self) -> int:
        return len(self.times)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.times) if self.n > 1 else 0.0

    def quantile(self, q: float) -> float:
        """Linear-interpolated quantile, ``q`` in [0, 1] (what ``torch.quantile`` computes)."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile {q} is outside [0, 1]")
        ordered = sorted(self.times)
        pos = q * (len(ordered) - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    def select(self, return_mode: str = "mean", quantiles: Sequence[float] | None = None):
        """The number (or list) a caller asked for: quantiles win over ``return_mode``, as in triton."""
        if quantiles is not None:
            values = [self.quantile(q) for q in quantiles]
            return values[0] if len(values) == 1 else values
        if return_mode not in RETURN_MODES:
            raise ValueError(f"return_mode={return_mode!r}: expected one of {', '.join(RETURN_MODES)}")
        if return_mode == "all":
            return list(self.times)
        return getattr(self, return_mode)

    def as_dict(self) -> dict[str, float]:
        return {"n": self.n, "mean": self.mean, "median": self.median, "min": self.min, "max": self.max,
                "std": self.std, "p20": self.quantile(0.2), "p80": self.quantile(0.8)}


def summarize(times: Sequence[float], return_mode: str = "mean", quantiles: Sequence[float] | None = None):
    """The one place bench statistics come from: samples -> the requested number(s)."""
    return BenchStats(tuple(float(t) for t in times)).select(return_mode, quantiles)


def _iterations(estimate_ms: float, warmup: float, rep: float,
                n_warmup: int | None, n_repeat: int | None) -> tuple[int, int]:
    est = max(estimate_ms, 1e-4)
    nw = n_warmup if n_warmup is not None else max(1, int(warmup / est))
    nr = n_repeat if n_repeat is not None else max(1, int(rep / est))
    return min(max(nw, 0), _MAX_ITERATIONS), min(max(nr, 1), _MAX_ITERATIONS)


def _resolve_device(device) -> str:
    if device is None:
        from ..target import cuda_available
        return "cuda" if cuda_available() else "cpu"
    kind = torch.device(device).type
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"do_bench: unsupported device {device!r} (expected 'cpu' or 'cuda')")
    return kind


def _cpu_times(fn, warmup, rep, n_warmup, n_repeat) -> list[float]:
    fn()  # first call: lazy loading, page faults, allocator warm-up
    samples: list[float] = []
    began = time.perf_counter()
    while len(samples) < _ESTIMATE_CALLS and (len(samples) < 2 or (time.perf_counter() - began) * 1e3 < max(rep, 1e-3)):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    # the fastest estimate call: on a shared machine one call stalled by another job (a time slice,
    # tens of ms) made the mean ask for a single repetition of a 0.2 ms kernel (issue 24)
    nw, nr = _iterations(min(samples), warmup, rep, n_warmup, n_repeat)
    for _ in range(nw):
        fn()
    times = []
    clock = time.perf_counter
    for _ in range(nr):
        t0 = clock()
        fn()
        times.append((clock() - t0) * 1e3)
    return times


def _cpu_mode_times(fn, rep, n_repeat, cap) -> list[float]:
    """CPU mode (``cpu_mode.bench_reps``): a first call that takes the whole ``rep`` budget or more is
    the only sample; otherwise it was the warmup, and timed calls follow until ``cap`` samples (or
    ``n_repeat``, if fewer) or ``rep`` ms are spent, at least one."""
    clock = time.perf_counter
    t0 = clock()
    fn()
    first = (clock() - t0) * 1e3
    if first >= rep:
        return [first]
    wanted = cap if n_repeat is None else max(1, min(cap, n_repeat))
    times: list[float] = []
    began = clock()
    while len(times) < wanted and (not times or (clock() - began) * 1e3 < rep):
        t0 = clock()
        fn()
        times.append((clock() - t0) * 1e3)
    return times


def _capture_graph(fn: Callable[[], object]) -> Callable[[], None]:
    """Capture one call of ``fn`` in a CUDA graph (after warming it up on a side stream)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay  # the bound method keeps the graph (and its memory pool) alive


def _check_flush(flush_l2):
    if flush_l2 not in (True, False, None, "clean", "dirty"):
        raise ValueError(f"do_bench: flush_l2 must be True/False, 'clean' or 'dirty', not {flush_l2!r}")


def _l2_flusher(flush_l2):
    """A callable that evicts L2 (see the module docstring), or None for ``flush_l2=False``;
    ``measure`` has validated ``flush_l2``."""
    if flush_l2 is False or flush_l2 is None:
        return None
    buf = torch.zeros(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    if flush_l2 == "dirty":
        return buf.zero_
    sink = torch.empty((), dtype=torch.float32, device="cuda")
    return lambda: torch.sum(buf, dim=0, out=sink)


def _cuda_times(fn, warmup, rep, n_warmup, n_repeat, flush_l2, cuda_graph) -> list[float]:
    fn()
    torch.cuda.synchronize()
    if cuda_graph:
        fn = _capture_graph(fn)
    flush = _l2_flusher(flush_l2)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(_ESTIMATE_CALLS):
        if flush is not None:
            flush()
        fn()
    end.record()
    torch.cuda.synchronize()
    nw, nr = _iterations(start.elapsed_time(end) / _ESTIMATE_CALLS, warmup, rep, n_warmup, n_repeat)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(nr)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(nr)]
    for _ in range(nw):
        fn()
    for i in range(nr):
        if flush is not None:
            flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def measure(fn: Callable[[], object], warmup: float = 25, rep: float = 100, n_warmup: int | None = None,
            n_repeat: int | None = None, flush_l2: bool | str = True, cuda_graph: bool = False,
            device: str | torch.device | None = None) -> BenchStats:
    """Time ``fn()`` (no arguments) and return every sample as ``BenchStats`` (ms per call)."""
    kind = _resolve_device(device)
    _check_flush(flush_l2)
    if kind == "cuda":
        times = _cuda_times(fn, warmup, rep, n_warmup, n_repeat, flush_l2, cuda_graph)
    else:
        if cuda_graph:
            raise ValueError("do_bench: cuda_graph=True needs a CUDA device")
        from ..compat.cpu_mode import bench_reps
        cap = bench_reps()
        times = (_cpu_times(fn, warmup, rep, n_warmup, n_repeat) if cap is None
                 else _cpu_mode_times(fn, rep, n_repeat, cap))
    return BenchStats(tuple(times))


def do_bench(fn: Callable[[], object], warmup: float = 25, rep: float = 100, n_warmup: int | None = None,
             n_repeat: int | None = None, return_mode: str = "mean", quantiles: Sequence[float] | None = None,
             flush_l2: bool | str = True, cuda_graph: bool = False, device: str | torch.device | None = None):
    """Milliseconds per call of ``fn()``: the ``return_mode`` statistic, or a list for ``quantiles``.

    ``device`` picks the clock: CUDA events or the CPU's ``perf_counter`` (default: CUDA when
    available). ``warmup``/``rep`` are in ms of work; ``n_warmup``/``n_repeat`` fix the counts.
    """
    if return_mode not in RETURN_MODES:  # fail before spending the benchmark time
        raise ValueError(f"return_mode={return_mode!r}: expected one of {', '.join(RETURN_MODES)}")
    stats = measure(fn, warmup, rep, n_warmup, n_repeat, flush_l2, cuda_graph, device)
    return stats.select(return_mode, quantiles)


def host_time_us(fn: Callable[[], object], bursts: int = 200, per_burst: int = 50) -> float:
    """Host microseconds per call of `fn` (launch overhead, not GPU time): median over bursts of
    `per_burst` calls, synchronizing the device between bursts so the launch queue never fills
    (a full queue would time the GPU, not the host)."""
    import torch
    from ..target import cuda_available
    sync = torch.cuda.synchronize if cuda_available() else (lambda: None)
    for _ in range(3 * per_burst):
        fn()
    sync()
    samples = []
    clock = time.perf_counter
    for _ in range(bursts):
        t0 = clock()
        for _ in range(per_burst):
            fn()
        samples.append((clock() - t0) / per_burst)
        sync()
    samples.sort()
    return samples[len(samples) // 2] * 1e6

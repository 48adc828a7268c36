"""How a tuning run turns timings into a choice: one ``MeasurePolicy`` per device the kernels run on.

- ``cuda`` (CUDA events; a GPU runs one kernel at a time, undisturbed by the host's load): a
  config's latency is the median of its samples; configs within 5% of the fastest (at most 4)
  are timed again in 3 interleaved rounds; within 1% after that is a tie.
- ``cpu`` (``perf_counter`` on a machine other jobs share): another process that takes a core for
  a moment stretches a call of a multi-threaded kernel by a whole time slice, so the samples are
  the kernel's time plus waits that only ever add.  A config's latency is a low quantile of many
  short timings (``quantile``: 5%), the calls that ran undisturbed.  And one config's timing (its
  own ~0.1 s) can fall entirely in a burst of other jobs: on a 2-core machine shared with other
  jobs, one config's median moved by up to 40% between runs of the 16-config GEMM tune, and a
  0.2 ms stand-in measured 3.9 ms in one Ray benchmark task (issue 24).  So every config that
  passed (the fastest 16) is timed again, in 12 interleaved rounds on one worker, where load
  drift falls on all of them alike; within 3% after that is a tie.

Either way, ties (and configs the runoff marks within the noise of the fastest) go to the first listed
config (TileLang keeps the first of equal latencies), so two runs, or two executors, that see the same
configs within the noise choose the same one.

The noise: after the runoff, each leader's ratio to the fastest is bootstrapped over the rounds
(rounds resampled together for all leaders, so drift cancels in the ratio); a leader whose
5th-percentile ratio is within the tie of the fastest cannot be told apart from it by this
measurement: ``ConfigResult.within_noise`` (the table says so).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from ..profiler.bench import BenchStats
from .result import ConfigResult

__all__ = ["MeasurePolicy", "POLICIES", "policy_for", "runoff_leaders", "choose_best", "settle_runoff"]


@dataclass(frozen=True)
class MeasurePolicy:
    """The statistic of a config's samples, the runoff's size, and the tie."""

    name: str
    quantile: float | None       # None: the median; else this quantile of the samples
    runoff_window: float         # configs within this fraction of the fastest are timed again
    runoff_max: int              # at most this many (the fastest)
    runoff_rounds: int           # interleaved rounds
    round_share: float           # each round times each leader for this share of the run's rep (ms)
    round_warmup_share: float    # ... after this share of the run's warmup
    tie: float                   # after the runoff, within this fraction of the fastest: the first listed wins

    def latency(self, stats: BenchStats) -> float:
        return stats.median if self.quantile is None else stats.quantile(self.quantile)

    def latency_of(self, samples: Sequence[float]) -> float:
        return self.latency(BenchStats(tuple(samples)))


POLICIES = {
    "cuda": MeasurePolicy("cuda", quantile=None, runoff_window=0.05, runoff_max=4, runoff_rounds=3,
                          round_share=0.5, round_warmup_share=1.0, tie=0.01),
    "cpu": MeasurePolicy("cpu", quantile=0.05, runoff_window=float("inf"), runoff_max=16, runoff_rounds=12,
                         round_share=0.2, round_warmup_share=0.1, tie=0.03),
}


def policy_for(device_type: str | None) -> MeasurePolicy:
    """The policy of kernels timed on ``device_type`` ("cuda" or "cpu"; anything else: cpu)."""
    return POLICIES["cuda" if device_type == "cuda" else "cpu"]


def runoff_leaders(measured: Sequence[ConfigResult], policy: MeasurePolicy) -> list[ConfigResult]:
    """The configs measured in this run that are timed again: those within the policy's window of the
    fastest (at most ``runoff_max``, fastest first), or none when fewer than two are that close."""
    ok = sorted((r for r in measured if r.ok), key=lambda r: (r.latency, r.index))
    leaders = [r for r in ok if r.latency <= ok[0].latency * (1 + policy.runoff_window)][:policy.runoff_max] if ok else []
    return leaders if len(leaders) > 1 else []


def choose_best(ok: Sequence[ConfigResult], policy: MeasurePolicy) -> ConfigResult:
    """The fastest config; configs within the policy's tie of it tie, and so do those the runoff could not
    tell apart from it (``within_noise``, when the fastest is itself so marked): the first listed of them wins.
    Without the second rule a config marked "(within noise)" in the table could lose to a later one by its
    point estimate alone, and two executors timing the same tie would choose differently.  (A cap on how much
    slower a marked config may be was tried and dropped: under two busy loops two identical kernels measured
    18% apart in a Ray runoff, both marked, and the cap made the executors disagree.)"""
    fastest = min(ok, key=lambda r: (r.latency, r.index))
    tied = [r for r in ok if r.latency <= fastest.latency * (1 + policy.tie)
            or (fastest.within_noise and r.within_noise)]
    return min(tied, key=lambda r: r.index)


BOOTSTRAP = 200


def settle_runoff(leaders: Sequence[ConfigResult], rounds: dict[int, list[list[float]]],
                  policy: MeasurePolicy) -> None:
    """Give each leader that was timed in the runoff its latency and statistics from all its runoff
    samples (``rounds[index]``: one list of samples per round), and mark those within the noise of
    the fastest (see the module docstring).  A leader missing from ``rounds`` keeps its measurement."""
    timed = [r for r in leaders if rounds.get(r.index) and all(rounds[r.index])]
    for r in timed:
        stats = BenchStats(tuple(t for samples in rounds[r.index] for t in samples))
        r.latency, r.stats = policy.latency(stats), dict(stats.as_dict(), runoff_rounds=len(rounds[r.index]))
    n = min((len(rounds[r.index]) for r in timed), default=0)
    if len(timed) < 2 or n < 2:
        return
    fastest = min(timed, key=lambda r: (r.latency, r.index))
    rng = random.Random(n)  # deterministic: the same samples give the same marks
    ratios: dict[int, list[float]] = {r.index: [] for r in timed}
    for _ in range(BOOTSTRAP):
        picks = [rng.randrange(n) for _ in range(n)]

        def resampled(r: ConfigResult) -> float:
            return policy.latency_of([t for k in picks for t in rounds[r.index][k]])

        base = resampled(fastest)
        for r in timed:
            ratios[r.index].append(resampled(r) / base)
    for r in timed:
        if r is fastest:
            continue
        spread = BenchStats(tuple(ratios[r.index]))
        r.within_noise = spread.quantile(0.05) <= 1 + policy.tie
        r.stats["vs_fastest_p05_p95"] = [spread.quantile(0.05), spread.quantile(0.95)]
    fastest.within_noise = any(r.within_noise for r in timed if r is not fastest)
    for r in timed:   # stored with the stats in the tuning database, so a later run chooses the same
        r.stats["within_noise"] = r.within_noise

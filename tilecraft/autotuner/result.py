"""What a tuning run produces: one ``ConfigResult`` per config and the ``AutotuneResult``.

``AutotuneResult.table()`` prints the change-one-thing table of the tuning guide: the first
config is the baseline, spelled out in full; every other row names only what it changes, so the
effect of each knob can be read off directly.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["ConfigResult", "AutotuneResult", "AutotuneError", "OK", "COMPILE_ERROR", "LAUNCH_ERROR",
           "MISMATCH", "TIMEOUT"]

OK = "ok"
COMPILE_ERROR = "compile error"
LAUNCH_ERROR = "launch error"
MISMATCH = "mismatch"
TIMEOUT = "timeout"
SKIPPED = "skipped (early stop)"
CPU_MODE_SKIPPED = "skipped (CPU mode)"   # compat/cpu_mode.autotune_configs; not stored in the database


class AutotuneError(RuntimeError):
    """Every config failed; the message lists each config with its reason."""


@dataclass
class ConfigResult:
    """The fate of one config: ``status`` is "ok" (with a latency) or why it was skipped."""

    index: int
    config: dict
    status: str = OK
    latency: float | None = None  # ms per call: the median (CUDA) or a low quantile (CPU) of the samples, measure.py
    stats: dict | None = None  # mean/median/min/max/std/p20/p80 and sample count
    reason: str | None = None
    compile_s: float | None = None
    within_noise: bool | None = None  # after the runoff: not told apart from the fastest (measure.settle_runoff)

    @property
    def ok(self) -> bool:
        return self.status == OK and self.latency is not None

    def short_reason(self, width: int = 70) -> str:
        first = (self.reason or "").strip().splitlines()[0] if self.reason else ""
        return first if len(first) <= width else first[: width - 3] + "..."

    def to_json(self) -> dict:
        return {"index": self.index, "status": self.status, "latency": self.latency, "stats": self.stats,
                "reason": self.reason, "compile_s": self.compile_s, "within_noise": self.within_noise}


def _fmt_value(v: Any) -> str:
    return v.__name__ if callable(v) and hasattr(v, "__name__") else str(v)


def config_label(config: dict, baseline: dict | None) -> str:
    """``k=v ...`` for the baseline; ``change k=v`` (only the differences) for the others."""
    if baseline is None:
        return "baseline: " + " ".join(f"{k}={_fmt_value(v)}" for k, v in config.items())
    missing = object()
    diff = [f"{k}={_fmt_value(v)}" for k, v in config.items() if baseline.get(k, missing) != v]
    diff += [f"-{k}" for k in baseline if k not in config]
    return "change " + " ".join(diff) if diff else "same as baseline"


def _metric(amount: float | Callable | None, config: dict) -> float | None:
    if amount is None:
        return None
    return float(amount(config)) if callable(amount) else float(amount)


@dataclass
class AutotuneResult:
    """The best config and its kernel, plus every config's outcome."""

    config: dict
    latency: float
    ref_latency: float | None
    kernel: Any
    func: Any = None
    all_results: list[ConfigResult] = field(default_factory=list)
    from_cache: bool = False
    tuning_time: float = 0.0
    name: str = "kernel"
    flops: float | Callable | None = None
    bytes: float | Callable | None = None
    measured: int | None = None  # configs compiled and benchmarked by this run (the others came from the database)
    executor: str = "local"
    phase_seconds: dict = field(default_factory=dict)  # wall time of the compile and benchmark phases

    @property
    def libcode(self) -> str | None:
        """The best kernel's generated source (TileLang's name)."""
        get = getattr(self.kernel, "get_kernel_source", None)
        return get() if callable(get) else None

    @property
    def best(self) -> ConfigResult:
        return min((r for r in self.all_results if r.ok), key=lambda r: r.latency)

    @property
    def failed(self) -> list[ConfigResult]:
        return [r for r in self.all_results if not r.ok]

    def rows(self) -> list[dict[str, str]]:
        """The table's cells, one dict per config (plus the reference when it was timed)."""
        best = self.latency
        base = self.all_results[0].config if self.all_results else None
        throughput = "TFLOP/s" if self.flops is not None else "GB/s" if self.bytes is not None else None
        rows = []
        for r in self.all_results:
            row = {"#": str(r.index), "config": config_label(r.config, None if r.config is base else base)}
            if r.ok:
                row["latency (ms)"] = f"{r.latency:.4f}"
                row["vs best"] = "best" if r.latency == best and r.config == self.config else f"{(r.latency / best - 1):+.1%}"
                if r.within_noise and row["vs best"] != "best":
                    row["vs best"] += " (within noise)"
                row["vs ref"] = f"{self.ref_latency / r.latency:.2f}x" if self.ref_latency else "-"
                if throughput == "TFLOP/s":
                    row[throughput] = f"{_metric(self.flops, r.config) / r.latency / 1e9:.2f}"
                elif throughput == "GB/s":
                    row[throughput] = f"{_metric(self.bytes, r.config) / r.latency / 1e6:.1f}"
                row["status"] = OK
            else:
                row.update({"latency (ms)": "-", "vs best": "-", "vs ref": "-"})
                if throughput:
                    row[throughput] = "-"
                row["status"] = f"{r.status}: {r.short_reason()}" if r.reason else r.status
            rows.append(row)
        if self.ref_latency:
            ref = {"#": "", "config": "reference", "latency (ms)": f"{self.ref_latency:.4f}",
                   "vs best": f"{(self.ref_latency / best - 1):+.1%}", "vs ref": "1.00x"}
            if throughput == "TFLOP/s":
                ref[throughput] = f"{_metric(self.flops, self.config) / self.ref_latency / 1e9:.2f}"
            elif throughput == "GB/s":
                ref[throughput] = f"{_metric(self.bytes, self.config) / self.ref_latency / 1e6:.1f}"
            ref["status"] = "reference"
            rows.append(ref)
        return rows

    def table(self, show: bool = True, file=None) -> str:
        """The change-one-thing table as Markdown; printed unless ``show=False``; returned either way."""
        rows = self.rows()
        headers = list(rows[0].keys()) if rows else ["config"]
        widths = {h: max(len(h), *(len(r.get(h, "")) for r in rows)) for h in headers}
        def line(cells):
            return "| " + " | ".join(cells[h].ljust(widths[h]) for h in headers) + " |"
        out = [line({h: h for h in headers}), "|" + "|".join("-" * (widths[h] + 2) for h in headers) + "|"]
        out += [line({h: r.get(h, "") for h in headers}) for r in rows]
        known = 0 if self.measured is None else len(self.all_results) - self.measured
        origin = (" (from the tuning database)" if self.from_cache else
                  f" ({known} of {len(self.all_results)} configs from the tuning database)" if known else "")
        title = f"autotune {self.name}: best {self.latency:.4f} ms with {self.config}{origin}"
        text = title + "\n" + "\n".join(out)
        if show:
            print(text, file=file or sys.stdout)
        return text

    def plot(self, path: str, title: str | None = None) -> str:
        """Save a bar chart of latency per config (failed configs marked) to ``path``; returns it."""
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError as exc:
            raise ImportError("AutotuneResult.plot needs matplotlib: pip install matplotlib "
                              "(or pip install 'tilecraft[plot]')") from exc
        results = self.all_results
        base = results[0].config if results else None
        labels = [f"#{r.index} " + config_label(r.config, None if r.config is base else base) for r in results]
        fig = Figure(figsize=(10, 1.2 + 0.45 * max(len(results), 1)))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        ys = list(range(len(results)))
        ok_max = max((r.latency for r in results if r.ok), default=1.0)
        for y, r in zip(ys, results):
            if r.ok:
                color = "tab:green" if r.latency == self.latency and r.config == self.config else "tab:blue"
                ax.barh(y, r.latency, color=color)
                ax.text(r.latency, y, f" {r.latency:.4f}", va="center", fontsize=8)
            else:
                ax.text(0, y, f" {r.status}", va="center", color="tab:red", fontsize=8)
        if self.ref_latency:
            ax.axvline(self.ref_latency, color="tab:gray", linestyle="--", label=f"reference {self.ref_latency:.4f} ms")
            ax.legend(loc="best", fontsize=8)
        ax.set_yticks(ys)
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, max(ok_max, self.ref_latency or 0) * 1.25)
        ax.set_xlabel("latency (ms)")
        ax.set_title(title or f"autotune {self.name}")
        fig.tight_layout()
        fig.savefig(path)
        return str(path)

    def __repr__(self) -> str:
        n_ok = sum(r.ok for r in self.all_results)
        ref = f", ref_latency={self.ref_latency:.4f}" if self.ref_latency else ""
        return (f"AutotuneResult({self.name}: config={self.config}, latency={self.latency:.4f} ms{ref}, "
                f"{n_ok}/{len(self.all_results)} configs ok{', cached' if self.from_cache else ''})")

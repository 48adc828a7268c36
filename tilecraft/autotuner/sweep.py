"""Tuning many problems at once: one factory, one config space, a list of shapes.

    report = tune_many(matmul, shapes=[(1024, 1024, 1024), (2048, 2048, 2048)],
                       space={"block_M": [64, 128], "block_N": [64, 128]}, executor="ray")
    report.table(); report.plot("tune_matmul.png")

Each shape is the factory's fixed arguments (a tuple of positional values, or a dict of keyword
values); ``space`` is a dict of value lists whose product is the config list (or a list of config
dicts). Every shape is one ``AutoTuner.run`` on the chosen executor, so each reads and writes the
tuning database: a second sweep over the same shapes benchmarks nothing and only loads each best
kernel (``report.measured`` counts what was benchmarked). ``tilecraft tune`` is this from the
command line.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from tqdm.auto import tqdm

from .result import AutotuneError, AutotuneResult, config_label
from .tuner import AutoTuner

__all__ = ["SweepReport", "expand_space", "tune_many"]


def expand_space(space: dict[str, Sequence[Any]] | Sequence[dict]) -> list[dict]:
    """The configs of a space: the product of a dict of value lists, in order, or a list of dicts as is."""
    if isinstance(space, dict):
        names = list(space)
        values = [list(v) if isinstance(v, (list, tuple, range)) else [v] for v in space.values()]
        if any(not v for v in values):
            raise ValueError(f"tune: every parameter of the space needs at least one value, got {space}")
        return [dict(zip(names, combo)) for combo in itertools.product(*values)]
    configs = list(space)
    if not configs or any(not isinstance(c, dict) for c in configs):
        raise ValueError("tune: the space must be a dict of value lists or a non-empty list of config dicts")
    return configs


def _shape_args(shape: Any) -> tuple[tuple, dict]:
    if isinstance(shape, dict):
        return (), dict(shape)
    if isinstance(shape, (tuple, list)):
        return tuple(shape), {}
    return (shape,), {}


def shape_label(shape: Any) -> str:
    args, kwargs = _shape_args(shape)
    return ", ".join([str(a) for a in args] + [f"{k}={v}" for k, v in kwargs.items()])


@dataclass
class SweepReport:
    """The outcome per shape (an ``AutotuneResult``, or the error when every config failed)."""

    name: str
    configs: list[dict]
    shapes: list[Any]
    results: list[AutotuneResult | None] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)

    @property
    def measured(self) -> int:
        """Configs benchmarked by this sweep (the others came from the tuning database)."""
        return sum(r.measured or 0 for r in self.results if r is not None)

    @property
    def known(self) -> int:
        return sum(len(r.all_results) - (r.measured or 0) for r in self.results if r is not None)

    def best(self) -> list[tuple[Any, dict | None, float | None]]:
        return [(s, dict(r.config) if r else None, r.latency if r else None) for s, r in zip(self.shapes, self.results)]

    def table(self, show: bool = True, file=None) -> str:
        """Markdown: one row per config, one latency column per shape (``*`` marks each shape's best)."""
        import sys

        base = self.configs[0] if self.configs else None
        headers = ["#", "config"] + [f"{shape_label(s)} (ms)" for s in self.shapes]
        rows = []
        for i, c in enumerate(self.configs):
            row = [str(i), config_label(c, None if i == 0 else base)]
            for r, err in zip(self.results, self.errors):
                if r is None:
                    row.append("failed")
                    continue
                cr = r.all_results[i]
                if cr.ok:
                    mark = "*" if cr.latency == r.latency and cr.config == r.config else ""
                    row.append(f"{cr.latency:.4f}{mark}")
                else:
                    row.append(cr.status)
            rows.append(row)
        widths = [max(len(h), *(len(r[j]) for r in rows)) for j, h in enumerate(headers)]
        def line(cells):
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
        out = [f"tune {self.name}: {len(self.configs)} configs x {len(self.shapes)} shapes; "
               f"benchmarked {self.measured}, {self.known} known from the tuning database",
               line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows]
        for s, err in zip(self.shapes, self.errors):
            if err:
                out.append(f"shape ({shape_label(s)}): {err.splitlines()[0]}")
        text = "\n".join(out)
        if show:
            print(text, file=file or sys.stdout)
        return text

    def plot(self, path: str, title: str | None = None) -> str:
        """Latency per config (x) for each shape (one line per shape, log scale); failed configs are gaps."""
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError as exc:
            raise ImportError("SweepReport.plot needs matplotlib: pip install 'tilecraft[plot]'") from exc
        fig = Figure(figsize=(max(6.0, 0.5 * len(self.configs) + 3), 4.5))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        xs = list(range(len(self.configs)))
        for shape, r in zip(self.shapes, self.results):
            if r is None:
                continue
            ys = [cr.latency if cr.ok else float("nan") for cr in r.all_results]
            (line,) = ax.plot(xs, ys, marker="o", label=shape_label(shape))
            best = next(i for i, cr in enumerate(r.all_results) if cr.ok and cr.latency == r.latency)
            ax.plot([best], [r.latency], marker="*", markersize=14, color=line.get_color())
        ax.set_yscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels([f"#{i}" for i in xs], fontsize=8)
        ax.set_xlabel("config (see the table; * = best for the shape)")
        ax.set_ylabel("latency (ms)")
        ax.set_title(title or f"tune {self.name}: time per config and shape")
        ax.legend(loc="best", fontsize=8, title="shape")
        fig.tight_layout()
        fig.savefig(path)
        return str(path)


def tune_many(factory: Callable, shapes: Sequence[Any], space: dict | Sequence[dict], executor: Any = None,
              compile_args: dict | None = None, progress: bool | None = None, **profile_args: Any) -> SweepReport:
    """Tune ``factory`` over ``space`` for every shape in ``shapes`` (see the module docstring).
    ``profile_args`` go to ``AutoTuner.set_profile_args`` (``ref_prog=``, ``warmup=``, ``rep=``, ...)."""
    configs = expand_space(space)
    shapes = list(shapes)
    if not shapes:
        raise ValueError("tune: give at least one shape")
    name = getattr(factory, "__name__", "kernel")
    report = SweepReport(name, configs, shapes)
    for shape in tqdm(shapes, desc=f"tune {name}", disable=None if progress is None else not progress):
        args, kwargs = _shape_args(shape)
        tuner = AutoTuner.from_kernel(factory, configs).set_kernel_parameters(args, kwargs)
        if compile_args is not None:
            tuner.set_compile_args(**compile_args)
        tuner.set_profile_args(**profile_args)
        try:
            report.results.append(tuner.run(executor=executor))
            report.errors.append(None)
        except AutotuneError as exc:
            report.results.append(None)
            report.errors.append(str(exc))
    return report

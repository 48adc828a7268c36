"""The fuzzer's results: per target and program kind, how many programs were compared (or, for a
compile-only target, compiled), how many gave a wrong answer, failed to compile, or were refused
with a clear error, and the seconds spent on them; the failures themselves, for the shrinker.

Targets: ``cpu`` (CPU target vs torch), ``compile <variant>`` (CUDA compile only), ``gpu <variant>``
(run on the GPU, compared with torch and with the CPU target), ``parse`` (the parser rejected a
valid program), ``worker`` (a worker process died while checking a task).  A wrong answer, a run
failure, a compile error, an internal error or a crash is a failure; a refusal (TilecraftError: a
known gap) is not.  Seconds are CPU-seconds summed over programs (lowering and compiling in the
worker processes, running and comparing), not wall time.
"""
from __future__ import annotations

COLUMNS = ("programs", "compared", "mismatches", "compile failures", "refused", "seconds")
_COLUMN_OF = {"compared": "compared", "compiled": "compared", "mismatch": "mismatches",
              "compile": "compile failures", "refused": "refused"}


class Report:
    def __init__(self):
        self.rows: dict = {}        # (target, kind) -> {column: count or seconds}
        self.failures: list = []    # (target, (seed, index, name), why)
        self.refusals: dict = {}    # (target, first 100 characters of the error) -> [program names]
        self.stopped = None         # the GPU checker, when a lost CUDA context ended the run early
        self.checked = 0            # programs checked (fewer than asked for when the run stopped early)

    def add(self, target: str, kind: str, prog: tuple, status: str, why: str = "", seconds: float = 0.0):
        """Record one program's outcome on `target`: `prog` is (seed, index, name), `status` one of
        compared / compiled / mismatch / compile / refused."""
        row = self.rows.setdefault((target, kind), dict.fromkeys(COLUMNS, 0))
        row["programs"] += 1
        row[_COLUMN_OF[status]] += 1
        row["seconds"] += seconds
        if status in ("mismatch", "compile"):
            self.failures.append((target, prog, why))
        elif status == "refused":
            self.refusals.setdefault((target, why[:100]), []).append(prog[2])

    def totals(self) -> dict:
        """target -> the column sums over kinds."""
        out: dict = {}
        for (target, _), row in self.rows.items():
            tot = out.setdefault(target, dict.fromkeys(COLUMNS, 0))
            for c in COLUMNS:
                tot[c] += row[c]
        return out

    def table(self) -> str:
        """Markdown: one row per target and kind, then one total row per target."""
        head = ["| target | kind | " + " | ".join(COLUMNS) + " |", "| --- | --- |" + " ---: |" * len(COLUMNS)]

        def line(target, kind, row):
            cells = [str(row[c]) for c in COLUMNS[:-1]] + [f"{row['seconds']:.1f}"]
            return f"| {target} | {kind} | " + " | ".join(cells) + " |"
        order = sorted(self.rows, key=lambda tk: (_target_rank(tk[0]), tk))
        body = [line(t, k, self.rows[(t, k)]) for t, k in order]
        totals = self.totals()
        body += [line(f"**{t}**", "all", totals[t]) for t in sorted(totals, key=lambda t: (_target_rank(t), t))]
        return "\n".join(head + body)


def _target_rank(target: str) -> int:
    return {"parse": 0, "worker": 0, "cpu": 1}.get(target, 2)

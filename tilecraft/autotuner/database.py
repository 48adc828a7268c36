"""The tuning database: every measured config of every tuned problem, in one SQLite file.

A *problem* is what a tuning result depends on, keyed like the kernel cache: the program (its
source and closure), its fixed arguments (the shapes and dtypes), the compile options (the target),
the machine it was timed on (the GPU model, or the CPU), the check settings, the tensors given with
``set_autotune_inputs`` (their shapes and dtypes) and tilecraft's own source
(``compiler_version_hash``). Within a problem each config has one row (keyed by ``cache_key`` of the
config): its status, latency (measure.py: the median on CUDA, a low quantile on the CPU), timing statistics, reason and compile time.

``AutoTuner.run`` (so ``@autotune`` and ``tilecraft tune``) reads the rows of its problem first
and compiles and benchmarks only the configs that have none; a run whose configs are all known
benchmarks nothing and only loads the best kernel (a compile-cache hit). Stored are the outcomes
that a re-run would repeat: ``ok``, ``compile error`` and ``mismatch``; a timeout, a launch error,
a lost worker or an early-stop skip is tried again next time.

Where: ``TILECRAFT_TUNING_DB`` (default ``<cache dir>/tuning.sqlite``). ``TILECRAFT_AUTO_TUNING_DISABLE_CACHE``
(or ``TILECRAFT_DISABLE_CACHE``) turns it off. Several processes may use one file at once (SQLite's
WAL journal; writes are one transaction per run). SQLite's locking needs a local file system: for
a team, share the compile cache (``TILECRAFT_CACHE_URL``) and keep one database per machine or per
tuning driver.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Iterable

from .. import env
from .result import COMPILE_ERROR, MISMATCH, OK, ConfigResult

__all__ = ["TuningDatabase", "STORED_STATUSES"]

STORED_STATUSES = (OK, COMPILE_ERROR, MISMATCH)
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS problems (
    problem TEXT PRIMARY KEY,     -- cache_key of what the result depends on
    name TEXT NOT NULL,           -- the kernel's name
    arguments TEXT NOT NULL,      -- the fixed arguments (shapes, dtypes), readable
    target TEXT NOT NULL,
    hardware TEXT NOT NULL,
    compiler TEXT NOT NULL,       -- compiler_version_hash()
    ref_latency REAL,             -- the reference's ms (the same statistic), when it was timed
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    problem TEXT NOT NULL REFERENCES problems(problem),
    config_key TEXT NOT NULL,
    config TEXT NOT NULL,         -- the config, readable (JSON)
    status TEXT NOT NULL,
    latency REAL,                 -- ms per call (measure.py)
    stats TEXT,                   -- JSON
    reason TEXT,
    compile_s REAL,
    created REAL NOT NULL,
    PRIMARY KEY (problem, config_key)
);
CREATE INDEX IF NOT EXISTS results_problem ON results(problem);
"""


def _readable(value: Any) -> str:
    return json.dumps(value, default=repr, sort_keys=True)


class TuningDatabase:
    """One SQLite file of tuning results (see the module docstring)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else env.tuning_db()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=60)
        conn.execute("PRAGMA journal_mode=WAL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            conn.close()
            raise RuntimeError(f"tuning database {self.path}: schema version {version}, this tilecraft reads "
                               f"{SCHEMA_VERSION}; use another TILECRAFT_TUNING_DB or remove the file")
        conn.executescript(_SCHEMA)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        return conn

    def lookup(self, problem: str, config_keys: Iterable[str]) -> dict[str, dict]:
        """config_key -> its stored row (as a dict), for the keys this problem has rows for."""
        wanted = set(config_keys)
        with closing(self._connect()) as conn:
            rows = conn.execute("SELECT config_key, status, latency, stats, reason, compile_s FROM results "
                                "WHERE problem = ?", (problem,)).fetchall()
        out = {}
        for key, status, latency, stats, reason, compile_s in rows:
            if key in wanted:
                stats = json.loads(stats) if stats else None
                # the runoff's noise mark travels in the stats (measure.settle_runoff): the choice among
                # stored configs (measure.choose_best) is then the one the tuning run made
                out[key] = {"status": status, "latency": latency, "stats": stats, "reason": reason,
                            "compile_s": compile_s, "within_noise": (stats or {}).get("within_noise")}
        return out

    def ref_latency(self, problem: str) -> float | None:
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT ref_latency FROM problems WHERE problem = ?", (problem,)).fetchone()
        return row[0] if row else None

    def record(self, problem: str, description: dict, results: Iterable[tuple[str, ConfigResult]],
               ref_latency: float | None) -> int:
        """Store this run's outcomes (those a re-run would repeat); returns how many rows were written."""
        now = time.time()
        rows = [(problem, key, _readable(r.config), r.status, r.latency, _readable(r.stats) if r.stats else None,
                 r.reason, r.compile_s, now) for key, r in results if r.status in STORED_STATUSES]
        with closing(self._connect()) as conn, conn:
            conn.execute(
                "INSERT INTO problems (problem, name, arguments, target, hardware, compiler, ref_latency, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(problem) DO UPDATE SET "
                "ref_latency = COALESCE(excluded.ref_latency, problems.ref_latency), updated = excluded.updated",
                (problem, description["name"], description["arguments"], description["target"],
                 description["hardware"], description["compiler"], ref_latency, now))
            conn.executemany("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return len(rows)

    def forget(self, problem: str) -> None:
        """Drop a problem's rows (e.g. its best config no longer compiles)."""
        with closing(self._connect()) as conn, conn:
            conn.execute("DELETE FROM results WHERE problem = ?", (problem,))
            conn.execute("DELETE FROM problems WHERE problem = ?", (problem,))

    def summary(self) -> list[dict]:
        """One dict per problem: name, arguments, target, hardware, configs stored, best latency."""
        with closing(self._connect()) as conn:
            rows = conn.execute(
                "SELECT p.name, p.arguments, p.target, p.hardware, COUNT(r.config_key), "
                "MIN(CASE WHEN r.status = 'ok' THEN r.latency END) FROM problems p "
                "LEFT JOIN results r ON r.problem = p.problem GROUP BY p.problem ORDER BY p.name, p.updated").fetchall()
        return [{"name": n, "arguments": a, "target": t, "hardware": h, "configs": c, "best_ms": b}
                for n, a, t, h, c, b in rows]

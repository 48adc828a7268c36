"""Compile autotuning configs in parallel worker processes, for their side effect on the disk cache.

Why processes: most of a compile is Python (parsing, passes, code generation) and holds the GIL,
so threads would not overlap it. Each worker compiles one config and returns only whether it
succeeded; the artifacts land in the shared, process-safe disk cache, and the parent's own
compile of the same config afterwards is a cache hit. The parent always compiles every config
itself, so this phase is purely an accelerator: a worker that fails for an environmental reason
costs time, never a result, and the parent's compile gives the authoritative error.

Why ``fork``: the workers inherit the program (the factory, its closure, the configs) through
memory instead of pickling, so factories defined inside functions work, and no user script is
re-imported (``spawn`` re-runs an unguarded ``__main__``). Children exit through ``os._exit``,
so they never run the parent's ``atexit`` handlers. Where ``fork`` is unavailable the phase is
skipped and the parent compiles serially.

CUDA note: a forked child cannot initialise CUDA if the parent already has. Compiling to a
cubin does not need a CUDA context, but resolving ``target="auto"`` may; the tuner therefore
compiles the first config in the parent before forking, which (with target detection memoised
by the compiler) hands the resolved target to the children for free.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import time
import traceback
import warnings
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tqdm.auto import tqdm

from .. import env

__all__ = ["Outcome", "precompile", "fork_available"]

# (compile function, configs): set in the parent right before the pool forks, read by children.
_JOB: tuple[Callable[[dict], Any], Sequence[dict]] | None = None


@dataclass(frozen=True)
class Outcome:
    ok: bool
    reason: str | None = None
    timed_out: bool = False


def describe_exception(exc: BaseException, limit: int = 2000) -> str:
    """``Type: message`` (the whole message: compiler errors carry the user's source line)."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= limit else text[:limit] + " ..."


def _compile_in_worker(index: int) -> Outcome:
    assert _JOB is not None, "worker started without a job"
    compile_fn, configs = _JOB
    try:
        compile_fn(configs[index])
        return Outcome(True)
    except BaseException as exc:  # report everything, including SystemExit from a user's factory
        if env.verbose():
            traceback.print_exc()
        return Outcome(False, describe_exception(exc))


def fork_available() -> bool:
    if "fork" not in mp.get_all_start_methods():
        return False
    return not mp.current_process().daemon  # daemonic processes may not have children


def _kill(executor: ProcessPoolExecutor) -> None:
    """Stop workers still compiling (a hung compile must not hang the tuner or interpreter exit)."""
    for proc in list(getattr(executor, "_processes", {}).values()):  # no public API before 3.14
        try:
            proc.kill()
        except (OSError, AttributeError):
            pass


def precompile(compile_fn: Callable[[dict], Any], configs: Sequence[dict], indices: Sequence[int],
               workers: int, timeout: float | None = None, desc: str = "compiling") -> dict[int, Outcome]:
    """Compile ``configs[i]`` for ``i`` in ``indices`` in up to ``workers`` forked processes.

    Returns an ``Outcome`` per index that was attempted (empty when the phase is skipped).
    ``timeout`` is seconds per config; the phase as a whole gets ``timeout`` times the number of
    rounds the pool needs, after which unfinished configs are reported as timed out.
    """
    global _JOB
    indices = list(indices)
    workers = min(workers, len(indices))
    if workers < 2 or not fork_available():
        return {}
    _JOB = (compile_fn, configs)
    outcomes: dict[int, Outcome] = {}
    executor = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork"))
    killed = False
    try:
        with warnings.catch_warnings():  # 3.12+ warns about fork() with threads (torch's pools) alive
            warnings.simplefilter("ignore", DeprecationWarning)
            futures: dict[Future, int] = {executor.submit(_compile_in_worker, i): i for i in indices}
        deadline = None if timeout is None else time.monotonic() + timeout * math.ceil(len(indices) / workers)
        pending = set(futures)
        with tqdm(total=len(indices), desc=desc, disable=None, leave=False) as bar:
            while pending:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                done, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
                if not done:  # deadline passed
                    for fut in pending:
                        outcomes[futures[fut]] = Outcome(False, f"compile timed out after {timeout:g} s", True)
                    _kill(executor)
                    killed = True
                    break
                for fut in done:
                    try:
                        outcomes[futures[fut]] = fut.result()
                    except Exception as exc:  # BrokenProcessPool: a worker died (e.g. a crash)
                        outcomes[futures[fut]] = Outcome(False, f"compile worker died: {describe_exception(exc)}")
                    bar.update(1)
    finally:
        executor.shutdown(wait=not killed, cancel_futures=True)
        _JOB = None
    return outcomes

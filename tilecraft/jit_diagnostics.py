"""TileLang's `tilelang.jit.diagnostics`: timing log lines around phases of the jit, on when
`TILELANG_JIT_DIAGNOSTICS` (or `TILECRAFT_JIT_DIAGNOSTICS`) is set or `verbose=True`.

`import tilelang.jit.diagnostics` lands here (compat/alias.py): `tilecraft.jit` is a module, not a
package, so the name is redirected rather than nested."""
from __future__ import annotations

import logging
import os
import time
from contextlib import contextmanager

logger = logging.getLogger("tilelang.jit.diagnostics")

_ON = ("1", "true", "yes", "on")


def diagnostics_enabled(*, verbose: bool = False) -> bool:
    raw = os.environ.get("TILELANG_JIT_DIAGNOSTICS", os.environ.get("TILECRAFT_JIT_DIAGNOSTICS", "0"))
    return bool(verbose) or raw.strip().lower() in _ON


@contextmanager
def jit_phase(name: str, *, enabled: bool | None = None, verbose: bool = False, **context):
    """Log the start, the end and the seconds of the phase `name` (and a failure with its traceback)."""
    if enabled is None:
        enabled = diagnostics_enabled(verbose=verbose)
    if not enabled:
        yield
        return
    ctx = "".join(f" {k}={v!r}" for k, v in sorted(context.items()))
    t0 = time.monotonic()
    logger.info("jit phase start: %s%s", name, ctx)
    try:
        yield
    except Exception:
        logger.exception("jit phase failed: %s after %.3fs%s", name, time.monotonic() - t0, ctx)
        raise
    logger.info("jit phase done: %s in %.3fs%s", name, time.monotonic() - t0, ctx)

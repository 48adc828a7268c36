"""`tilelang.tools.cuda.iket`: TileLang's in-kernel event tracer (tools/cuda/iket.py re-exports this).

A host-side `session(output_dir=...)` owns an event table (name -> id, in order of first use);
inside a kernel body `mark(name[, payload=payload(value, dtype)])` records one event and
`with range(name):` (also `with T.Kernel(...) as bx, range(name):`) records its begin and end.
Each becomes a typed statement (ir/intrinsics/debug.py: IketEvent) carrying the session's event id
and output directory.  The CPU target logs every event with a monotonic timestamp and its block;
the CUDA target, as TileLang's IKET, once per warp that executes it (its lowest active lane, with
that lane's payload) with %globaltimer and clock64, into a log the launcher allocates
(device/include/tilecraft/iket.h).  After each launch the runtime writes the trace (runtime/iket.py:
`launches[*].markers` and `launches[*].ranges`) into the session's directory, where `trace_files()`
finds it.
"""
from __future__ import annotations

import contextlib
import threading
from pathlib import Path

from ..errors import TilecraftError
from ..ir import Expr, as_expr, cast, seq
from ..ir import dtype as dt
from ..ir import intrinsics as I
from ..ir.intrinsics import IntrinsicCall
from ..ir.stmt import Evaluate
from .builder import caller_span, error, require_kernel

TRACE_SUFFIX = ".iket.json"   # the trace files the runtime writes (runtime/iket.py)


class Session:
    """One `iket.session`: its output directory, whether marks capture their payloads, the event table."""

    def __init__(self, output_dir, runtime_payloads: bool):
        self.output_dir = Path(output_dir).expanduser().resolve()
        self.runtime_payloads = bool(runtime_payloads)
        self.events: dict = {}

    def event_id(self, name) -> int:
        if not isinstance(name, str) or not name:
            raise error(f"iket: an event name must be a non-empty string, got {name!r}")
        return self.events.setdefault(name, len(self.events))


_STATE = threading.local()


def _sessions() -> list:
    if not hasattr(_STATE, "stack"):
        _STATE.stack = []
    return _STATE.stack


def _active(what: str) -> Session:
    s = _sessions()
    if not s:
        raise TilecraftError(f"{what} needs an active `with iket.session(output_dir=...)`", caller_span())
    return s[-1]


@contextlib.contextmanager
def session(output_dir=None, runtime_payloads: bool = False):
    """Trace the kernels parsed inside it: their events get ids from this session's table and their
    traces go to `output_dir` (created; default: ./iket_output)."""
    s = Session(output_dir if output_dir is not None else "iket_output", runtime_payloads)
    s.output_dir.mkdir(parents=True, exist_ok=True)
    _sessions().append(s)
    try:
        yield s
    finally:
        _sessions().pop()


def event_table() -> dict:
    """The active session's events: name -> id."""
    return dict(_active("iket.event_table()").events)


def output_dir() -> Path:
    return _active("iket.output_dir()").output_dir


def runtime_payloads_enabled() -> bool:
    return _active("iket.runtime_payloads_enabled()").runtime_payloads


def output_path(name, directory=None) -> Path:
    """`directory / name` (default: the active session's directory), the directory created."""
    d = Path(directory).expanduser() if directory is not None else output_dir()
    d.mkdir(parents=True, exist_ok=True)
    return d / name


def trace_files(directory=None) -> list:
    """The trace files in `directory` (default: the active session's), oldest first."""
    d = Path(directory).expanduser() if directory is not None else output_dir()
    if not d.is_dir():
        return []
    return sorted(d.glob("*" + TRACE_SUFFIX), key=lambda p: (p.stat().st_mtime_ns, p.name))


class Payload:
    """`iket.payload(value, dtype=...)`: a scalar recorded with a mark (when the session captures payloads)."""

    def __init__(self, value, dtype):
        self.dtype = dt.dtype(dtype)
        if not (self.dtype.is_int or self.dtype.is_float):
            raise error(f"iket.payload: dtype must be an integer or float type, got {dtype!r}")
        self.value = cast(as_expr(value), self.dtype)


def payload(value, dtype="int32") -> Payload:
    require_kernel("iket.payload")
    return Payload(value, dtype)


def _event(b, sess: Session, name, kind: str, value: Payload | None = None) -> Evaluate:
    intr = I.IketEvent(sess.event_id(name), name, kind, str(sess.output_dir),
                       str(value.dtype) if value is not None else "")
    args = (value.value,) if value is not None else ()
    return Evaluate(IntrinsicCall(intr, args, span=b.span), span=b.span)


def mark(name, payload=None):
    """Record event `name` (with `payload`'s value when the session captures payloads)."""
    b = require_kernel("iket.mark")
    sess = _active("iket.mark")
    if payload is not None and not isinstance(payload, Payload):
        raise error(f"iket.mark: payload must be iket.payload(value, dtype=...), got {payload!r}")
    b.emit(_event(b, sess, name, "mark", payload if sess.runtime_payloads else None))


class _Range:
    def __init__(self, b, sess, name):
        self.b, self.sess, self.name, self.span = b, sess, name, b.span
        sess.event_id(name)

    def build_scope(self, body):
        """The parser's hook for `with iket.range(name):` -- begin, the body, end."""
        return seq(_event(self, self.sess, self.name, "range_begin"), body,
                   _event(self, self.sess, self.name, "range_end"))


def range(name):  # noqa: A001 (TileLang's name)
    """`with iket.range(name):` -- record the body's begin and end as one range."""
    b = require_kernel("iket.range")
    return _Range(b, _active("iket.range"), name)


__all__ = ["session", "mark", "range", "payload", "event_table", "output_dir", "output_path", "trace_files",
           "runtime_payloads_enabled"]

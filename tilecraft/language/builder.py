"""The statement builder the parser drives while it walks a `@T.prim_func` body.

Language functions (`T.copy`, `T.alloc_shared`, ...) are ordinary Python functions; when the
parser calls them they emit their statements into the innermost open block of the active
`Builder` and take the current source span from it.  Called with no active builder (outside a
kernel body) they raise a clear error instead of doing something surprising.
"""
from __future__ import annotations

import contextvars
import inspect
import os
import sys
from contextlib import contextmanager

from ..errors import TilecraftError
from ..ir import Span, Stmt, seq
from ..ir import dtype as _dt

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("tilecraft_builder", default=None)


class Builder:
    def __init__(self):
        self.blocks: list[list[Stmt]] = [[]]
        self.span: Span | None = None
        self.kernel = None          # the open T.Kernel frame, if any
        self.names: dict[str, int] = {}
        self.pending_name: str | None = None  # target name of the assignment being parsed
        self.imports: list[str] = []  # T.import_source texts, in program order
        self.reducers: list = []      # the open `with T.attr(T.comm_reducer(...), "reduce_scope", ...)` scopes

    # -- statements ---------------------------------------------------------------------------
    def emit(self, stmt: Stmt) -> None:
        self.blocks[-1].append(stmt)

    @contextmanager
    def block(self):
        """Collect the statements emitted inside the `with` into a fresh list."""
        self.blocks.append([])
        box: list = []
        try:
            yield box
        finally:
            stmts = self.blocks.pop()
            box.append(seq(*stmts) if stmts else seq())

    def fresh_name(self, base: str) -> str:
        """Unique C-safe names: a second `x = ...` in one body becomes `x_1`."""
        base = base or "v"
        n = self.names.get(base, 0)
        self.names[base] = n + 1
        return base if n == 0 else f"{base}_{n}"


_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../tilecraft


def _is_internal(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PKG_DIR + os.sep)


def caller_span() -> Span | None:
    """The span of the innermost frame outside the tilecraft package: the user's line that
    called into the language (used when no parser is active to supply one)."""
    frame = sys._getframe(1)
    try:
        while frame is not None and _is_internal(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is None:
            return None
        info = inspect.getframeinfo(frame, context=1)
        text = info.code_context[0] if info.code_context else ""
        col = len(text) - len(text.lstrip())
        return Span(info.filename, info.lineno, col, text, info.function)
    finally:
        del frame


def current(what: str = "this construct") -> Builder:
    b = _ACTIVE.get()
    if b is None:
        raise TilecraftError(f"{what} can only be used inside a @T.prim_func body", caller_span(),
                             hint="T.* tile operations describe a kernel; they are parsed from the "
                                  "body of a @T.prim_func, not executed on tensors")
    return b


def active() -> Builder | None:
    return _ACTIVE.get()


def _pending_name() -> str | None:
    """The target of the assignment the active builder is parsing (ir/dtype.py names `n = T.int32()`)."""
    b = _ACTIVE.get()
    return getattr(b, "pending_name", None) if b is not None else None


_dt.use_pending_name(_pending_name)


def current_span() -> Span | None:
    b = _ACTIVE.get()
    return b.span if b is not None else None


@contextmanager
def activate(builder: Builder):
    token = _ACTIVE.set(builder)
    try:
        yield builder
    finally:
        _ACTIVE.reset(token)


def error(message: str, *, hint: str | None = None) -> TilecraftError:
    """An error at the statement the parser is currently building."""
    return TilecraftError(message, current_span(), hint=hint)


def require_kernel(what: str):
    b = current(what)
    if b.kernel is None:
        raise error(f"{what} must be used inside `with T.Kernel(...)`")
    return b


_WARNED: set = set()


def warn_once(key, message: str, category=UserWarning) -> None:
    """A warning about a construct at the user's current line, once per `key` per process
    (an option tilecraft accepts but does not act on: never silently dropped)."""
    if key in _WARNED:
        return
    _WARNED.add(key)
    import warnings
    span = current_span() or caller_span()
    if span is not None:
        warnings.warn_explicit(message, category, span.file, span.line)
    else:
        warnings.warn(message, category, stacklevel=3)

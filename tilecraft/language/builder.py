"""The statement builder the parser drives while it walks a `@T.prim_func` body.

Language functions (`T.copy`, `T.alloc_shared`, ...) are ordinary Python functions; when the
parser calls them they emit their statements into the innermost open block of the active
`Builder` and take the current source span from it.  Called with no active builder (outside a
kernel body) they raise a clear error instead of doing something surprising.
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager

from ..errors import TilecraftError
from ..ir import Span, Stmt, seq

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("tilecraft_builder", default=None)


class Builder:
    def __init__(self):
        self.blocks: list[list[Stmt]] = [[]]
        self.span: Span | None = None
        self.kernel = None          # the open T.Kernel frame, if any
        self.names: dict[str, int] = {}
        self.pending_name: str | None = None  # target name of the assignment being parsed

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


def current(what: str = "this construct") -> Builder:
    b = _ACTIVE.get()
    if b is None:
        raise TilecraftError(f"{what} can only be used inside a @T.prim_func body")
    return b


def active() -> Builder | None:
    return _ACTIVE.get()


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

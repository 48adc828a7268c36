"""The one public exception for mistakes in a user's program.

Every check in the front end and in the passes raises `TilecraftError` with the span of the
offending node, so the message names the user's file, line and source line.  The public entry
points (`jit`, `compile`) re-raise it with the compiler's own frames stripped, so the user sees
their program, not our stack.
"""
from __future__ import annotations

from .ir.node import Span


class TilecraftError(Exception):
    """A mistake in a tilecraft program, reported at the user's source line."""

    def __init__(self, message: str, span: Span | None = None, *, hint: str | None = None):
        self.message = message
        self.span = span
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.message]
        if self.span is not None:
            parts.append(self.span.render())
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)

    def with_span(self, span: Span | None) -> "TilecraftError":
        """Attach a location if the error has none yet (errors raised deep in a helper)."""
        if self.span is None and span is not None:
            return type(self)(self.message, span, hint=self.hint)
        return self


class UnknownDTypeError(TilecraftError, ValueError):
    """A dtype spelling tilecraft does not know (a `ValueError` too, for code that catches that)."""


class KernelValueError(TilecraftError, TypeError):
    """A Python operation that needs a compile-time answer (`if`, `and`, `int()`, min()...) applied
    to a kernel value (ir/pyops.py); a `TypeError` too, as Python raises for such operands."""


# TileLang users catch a generic compile error; keep an alias with that spirit.
CompileError = TilecraftError


class InternalCompilerError(TilecraftError):
    """A bug in tilecraft itself, reported with the user's line that triggered it."""


class CacheTrustWarning(UserWarning):
    """A cache entry was refused before anything of it was loaded (unsigned, signed with another
    key, or damaged) and is rebuilt, or the shared cache is not used (e.g. no signing key)."""


class PerformanceWarning(UserWarning):
    """The compiled kernel is correct but the toolchain reported something that makes it slower
    than it should be (e.g. ptxas serialising wgmma instructions)."""

"""Base of every IR node, and the source span each node carries.

Nodes are frozen dataclasses compared by identity (``eq=False``): two loads of the same element
are different nodes, and a rewriter signals "nothing changed" by returning the very same object.
Each node keeps the user's file and line (`Span`) so any error found in any pass can point at the
user's program rather than at the compiler.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    file: str
    line: int
    col: int = 0
    source_line: str = ""
    func: str = ""

    def __str__(self) -> str:
        return f'File "{self.file}", line {self.line}'

    def short(self) -> str:
        """`file.py:line`, for one-line reports."""
        return f"{os.path.basename(self.file)}:{self.line}"

    def render(self) -> str:
        """Python-traceback-like location block used in error messages."""
        where = f'  File "{self.file}", line {self.line}' + (f", in {self.func}" if self.func else "")
        if self.source_line:
            text = self.source_line.rstrip()
            stripped = text.lstrip()
            caret = " " * (4 + max(0, self.col - (len(text) - len(stripped)))) + "^"
            return f"{where}\n    {stripped}\n{caret}"
        return where


@dataclass(frozen=True, eq=False)
class Node:
    span: Span | None = field(default=None, kw_only=True, repr=False)

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def __str__(self) -> str:
        from .printer import to_text
        return to_text(self)


def where(span) -> str:
    """`file.py:line` of a node's span, or "?" when it has none."""
    return span.short() if span is not None else "?"

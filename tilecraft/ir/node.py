"""Base of every IR node, and the source span each node carries.

Nodes are frozen dataclasses with identity semantics (``eq=False``, ``hash`` = identity): two loads
of the same element are different nodes, and a rewriter signals "nothing changed" by returning the
very same object.  On expressions `==` / `!=` build comparisons in the kernel (TileLang's meaning,
ir/expr.py), so the compiler compares nodes only with `is` or the helpers at the end of this file
(`same`, `same_seq`, `index_of`, `contains`), never with `==`, `in` or `list.index`.
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

    def __getstate__(self):   # without what ir/functor.py keeps on a node (`_tc_...`)
        state = self.__dict__
        if any(k.startswith("_tc_") for k in state):
            state = {k: v for k, v in state.items() if not k.startswith("_tc_")}
        return state

    def __str__(self) -> str:
        from .printer import to_text
        return to_text(self)


def where(span) -> str:
    """`file.py:line` of a node's span, or "?" when it has none."""
    return span.short() if span is not None else "?"


# Identity comparisons for the compiler.  `==` on an expression builds a comparison in the kernel
# (ir/expr.py), so code comparing nodes -- or values that may be nodes, such as a shape entry that is
# an int or a symbolic Var -- uses these instead of `==`, `in` or `list.index`.

def same(a, b) -> bool:
    """`a is b` for IR nodes; `a == b` for Python values (an int never equals a node)."""
    if isinstance(a, Node) or isinstance(b, Node):
        return a is b
    return a == b


def same_seq(xs, ys) -> bool:
    """Element-wise `same` of two sequences of equal length."""
    xs, ys = tuple(xs), tuple(ys)
    return len(xs) == len(ys) and all(same(x, y) for x, y in zip(xs, ys))


def index_of(seq, x) -> int:
    """The position of `x` in `seq` by `same` (list.index compares with `==`); ValueError if absent."""
    for i, y in enumerate(seq):
        if same(x, y):
            return i
    raise ValueError(f"{x!r} is not in the sequence")


def contains(seq, x) -> bool:
    """`x in seq` by `same`."""
    return any(same(x, y) for y in seq)

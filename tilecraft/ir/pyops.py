"""The Python operators that cannot build IR on a kernel value, and the error each one raises.

A plain Python helper called from a kernel body (`def mask(q, k): return T.if_then_else(q == k, ...)`)
runs as Python on IR values: arithmetic and comparisons build IR (ir/expr.py), but Python forces a
plain bool, int or float out of `if`, `while`, `and` / `or` / `not`, `in`, chained comparisons,
`min()` / `max()` (they compare with `<`), `bool()`, `int()`, `float()`, `len()`, iteration and the
`math.*` functions.  Such an answer would be made up at compile time, so each raises a
`KernelValueError` (a `TilecraftError` and a `TypeError`) at the helper's line, saying what to write
instead.  A `@T.macro` helper is parsed like the kernel body, so its `if`, `and`, `or`, `not` and
`in` become kernel code.
"""
from __future__ import annotations

import linecache
import os
import re
import sys

from .node import Span

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (pattern on the user's source line, what it is, what to write instead); the first match wins.
_TRUTH_HINTS = (
    (re.compile(r"\b(min|max)\s*\("), "Python's min() / max() (they compare with `<` and need a truth value)",
     "use T.min(a, b) / T.max(a, b)"),
    (re.compile(r"^\s*(if|elif|while)\b|\bif\b.*\belse\b|\bassert\b"), "a Python `if` / `while` / `assert`",
     "use T.if_then_else(cond, a, b), or make the helper a @T.macro (its `if` becomes kernel code)"),
    (re.compile(r"\b(and|or|not)\b"), "Python's `and` / `or` / `not`",
     "use `(a) & (b)`, `(a) | (b)`, `~(a)` (or T.And / T.Or / T.Not)"),
    (re.compile(r"\bin\b"), "Python's `in`", "compare each value: `(x == a) | (x == b)`"),
    (re.compile(r"[<>=!]=?[^<>=!]+[<>=!]=?"), "a chained comparison (`a < b < c`)",
     "write `(a < b) & (b < c)`"),
)


_PARSER = tuple(os.path.join(_PACKAGE, "language", n) for n in ("parser.py", "parse_expr.py", "parse_loops.py"))


def user_frame(depth: int = 2):
    """The innermost caller frame outside the tilecraft package (the user's helper), or None when
    the parser itself applied the operation (`int(x)` written in a kernel body): the parser then
    reports the kernel's line."""
    f = sys._getframe(depth)
    while f is not None:
        file = os.path.abspath(f.f_code.co_filename)
        if file in _PARSER:
            return None
        if not file.startswith(_PACKAGE + os.sep):
            return f
        f = f.f_back
    return None


def _span(frame) -> Span | None:
    if frame is None:
        return None
    file, line = frame.f_code.co_filename, frame.f_lineno
    text = linecache.getline(file, line)
    col = len(text) - len(text.lstrip())
    return Span(file, line, col, text, frame.f_code.co_name)


def _error():
    from ..errors import KernelValueError  # errors.py imports ir.node: import at use
    return KernelValueError


def _describe(value) -> str:
    from .printer import to_text
    try:
        text = to_text(value)
    except Exception:  # noqa: BLE001 - only for the message
        text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def refuse(value, what: str, instead: str):
    """Raise the error for `what` (a Python operation) applied to the kernel value `value`."""
    frame = user_frame(3)
    raise _error()(
        f"{what} needs a Python value at compile time, but `{_describe(value)}` is a kernel value "
        f"(known only when the kernel runs)", _span(frame), hint=instead)


def refuse_truth(value):
    """`bool(value)`: Python asked a kernel value for a truth value (`if`, `and`, `in`, min/max...)."""
    frame = user_frame(3)
    span = _span(frame)
    what, instead = "a Python truth value (`if`, `and` / `or` / `not`, `in`, min() / max(), bool())", \
        "use T.if_then_else(cond, a, b), `&` / `|` / `~` for and / or / not, T.min / T.max, or make " \
        "the helper a @T.macro (its `if` and `and` become kernel code)"
    if span is not None:
        for pattern, construct, hint in _TRUTH_HINTS:
            if pattern.search(span.source_line):
                what, instead = construct, hint
                break
    raise _error()(
        f"{what} cannot be applied to the kernel value `{_describe(value)}`: its value is known only "
        f"when the kernel runs, so Python would make up an answer", span, hint=instead)

"""Helpers for error-message tests: find a tagged line in a test file and check that a
`TilecraftError` names that file, line and source text, with no compiler frames at the bottom of
its traceback.  A line is tagged with a trailing `# err:<tag>` comment."""
from __future__ import annotations

import os
import re
import traceback

import tilecraft

PKG = os.path.dirname(os.path.abspath(tilecraft.__file__))
# Frames of the compiler a user may see at the bottom of a traceback: the public entry points.
ENTRY_FRAMES = {("jit.py", "__call__"), ("jit.py", "compile"), ("parser.py", "prim_func")}
# A T.* function called directly from user code (outside any @T.prim_func) is itself the entry
# point: Python cannot raise from the caller's frame, so its own frame and the builder's guard
# (`current` / `require_kernel`) are the least a traceback can show.
LANGUAGE_DIR = os.path.join(PKG, "language")
GUARD_FRAMES = {("builder.py", "current"), ("builder.py", "require_kernel")}


def _is_direct_language_call(frames) -> bool:
    """frames: the compiler frames of a traceback, outermost first."""
    return (len(frames) >= 2 and os.path.abspath(frames[0].filename).startswith(LANGUAGE_DIR)
            and all((os.path.basename(f.filename), f.name) in GUARD_FRAMES for f in frames[1:]))


def where(path: str, tag: str) -> tuple[int, str]:
    with open(path) as f:
        lines = f.read().splitlines()
    hits = [(i + 1, line) for i, line in enumerate(lines) if line.rstrip().endswith(f"# err:{tag}")]
    assert len(hits) == 1, f"tag {tag} must mark exactly one line of {path}"
    n, line = hits[0]
    return n, line.split("# err:")[0].strip()


def check_error(e: BaseException, path: str, tag: str, *needles: str) -> None:
    """`e` names `path`, the tagged line and its text, and matches every regex in `needles`."""
    assert isinstance(e, tilecraft.TilecraftError), type(e)
    msg = str(e)
    line, text = where(path, tag)
    assert os.path.basename(path) in msg, msg
    assert f"line {line}" in msg, f"expected line {line} in:\n{msg}"
    assert text in msg, f"expected source text {text!r} in:\n{msg}"
    for n in needles:
        assert re.search(n, msg), f"expected /{n}/ in:\n{msg}"
    frames = [f for f in traceback.extract_tb(e.__traceback__) if os.path.abspath(f.filename).startswith(PKG)]
    if _is_direct_language_call(frames):
        frames = []
    internal = [(os.path.basename(f.filename), f.name) for f in frames
                if (os.path.basename(f.filename), f.name) not in ENTRY_FRAMES]
    assert not internal, f"traceback ends inside the compiler: {internal}"
    assert e.__cause__ is None and (e.__context__ is None or e.__suppress_context__), \
        "an internal exception is chained to the user's error"

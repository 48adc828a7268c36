"""`tilecraft run prog.py [args]`: run an unmodified TileLang program on tilecraft.

The program runs as `python prog.py args` would run it (as `__main__`, with `sys.argv` set and its
own folder first on `sys.path`, so its sibling helper modules import), except that every
`import tilelang[.X]` is answered by `tilecraft[.X]` (see `alias.py`).
"""
from __future__ import annotations

import os
import runpy
import sys

from .alias import install


def run_program(path: str, argv: list[str] | None = None) -> None:
    """Execute the file `path` as `__main__` with `sys.argv = [path, *argv]`; exceptions propagate
    (a `SystemExit` from the program carries its exit status)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such program: {path}")
    install()
    path = os.path.abspath(path) if not os.path.isabs(path) else path
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [path, *(argv or [])]
    sys.path.insert(0, os.path.dirname(path))
    try:
        runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def run_module(name: str, argv: list[str] | None = None) -> None:
    """`tilecraft run -m pkg.mod args`: the same for a module (as `python -m`)."""
    install()
    saved_argv = sys.argv[:]
    sys.argv = [name, *(argv or [])]
    try:
        runpy.run_module(name, run_name="__main__", alter_sys=True)
    finally:
        sys.argv = saved_argv

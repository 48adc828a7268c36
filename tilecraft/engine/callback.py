"""`tilelang.engine.callback`: functions that rewrite the generated CUDA source before it is compiled.

    @register_cuda_postproc_callback
    def edit(code: str, target) -> str: ...

Honoured by `compiler.build` for every later CUDA compile; the callback's code is part of the
kernel cache key, so changing it never serves a kernel built without it.
"""
from __future__ import annotations

import hashlib
from typing import Callable

_CUDA_POSTPROC: list[Callable] = []


def register_cuda_postproc_callback(func: Callable | None = None, override: bool = True):
    """Register `func(code, target) -> code` (as a decorator, with or without arguments).
    `override=True` replaces a previously registered callback, as in TileLang."""
    def register(f):
        if override:
            _CUDA_POSTPROC.clear()
        _CUDA_POSTPROC.append(f)
        return f
    return register(func) if callable(func) else register


def register_hip_postproc_callback(func: Callable | None = None, override: bool = True):
    def register(f):
        raise NotImplementedError("tilecraft has no HIP target: register_hip_postproc_callback does not apply")
    return register(func) if callable(func) else register


def apply_cuda_postproc(code: str, target) -> str:
    for f in _CUDA_POSTPROC:
        code = f(code, target)
        if not isinstance(code, str):
            raise TypeError(f"CUDA post-processing callback {getattr(f, '__qualname__', f)!r} must return the "
                            f"source as a str, got {type(code).__name__}")
    return code


def memo_key() -> tuple:
    """The registered callbacks themselves, for the in-memory kernel memos of the jit (called per launch by
    the eager style: no hashing here; the disk cache uses `cache_token`)."""
    return tuple(_CUDA_POSTPROC)


def cache_token() -> tuple:
    """Identifies the registered callbacks by name and code (empty when none)."""
    out = []
    for f in _CUDA_POSTPROC:
        code = getattr(f, "__code__", None)
        if code is None:
            digest = repr(f)
        else:  # a callback made by a factory differs only in its closure's values or its defaults
            cells = tuple(_cell_value(c) for c in (getattr(f, "__closure__", None) or ()))
            state = repr((code.co_consts, cells, getattr(f, "__defaults__", None), getattr(f, "__kwdefaults__", None)))
            digest = hashlib.sha256(code.co_code + state.encode()).hexdigest()[:16]
        out.append((getattr(f, "__qualname__", repr(f)), digest))
    return tuple(out)


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:   # a cell not filled yet
        return "<empty cell>"

"""The tilecraft device header library.

Generated CUDA code includes ``<tilecraft/tilecraft.h>`` (or one of the smaller headers) and
calls small inline wrappers (``tc::mma_m16n8k16_f16_f32``, ``tc::ldmatrix_x4``,
``tc::cp_async_16``, ``tc::shfl_xor_reduce``...) instead of pasting inline PTX, so that every
hardware constraint is written down once, next to the instruction that imposes it.
The headers compile under NVRTC (no host headers) and nvcc, for sm_80 and newer.
"""
from __future__ import annotations

import functools
import hashlib
import os

_INCLUDE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def include_dir() -> str:
    """Absolute path of the directory to pass as ``-I``; headers live in ``tilecraft/`` under it."""
    return _INCLUDE_DIR


@functools.lru_cache(maxsize=None)
def fingerprint() -> str:
    """SHA-256 over every header's path and content: part of kernel cache keys, so editing a
    header never serves a cubin compiled against the old one."""
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(_INCLUDE_DIR)):
        for name in sorted(files):
            path = os.path.join(root, name)
            h.update(os.path.relpath(path, _INCLUDE_DIR).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read() + b"\0")
    return h.hexdigest()


__all__ = ["include_dir", "fingerprint"]

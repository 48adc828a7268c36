"""C++ compilation for the CPU target: generated source → shared library bytes.

Uses the system C++ compiler (`env.cxx()`), optimised, with OpenMP so the blocks of a kernel run
in parallel.  The library is returned as bytes and stored in the disk cache, from where it is
loaded with ctypes.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from .. import env
from .errors import CxxCompileError

# -fno-strict-aliasing: a T.view names a tile's bytes with another element type (the CPU target's
# reference semantics must hold for it as on the GPU)
FLAGS = ["-O2", "-std=c++17", "-fPIC", "-shared", "-fopenmp", "-fno-math-errno", "-fno-strict-aliasing", "-w"]


def include_dir() -> str:
    return str(Path(__file__).resolve().parent.parent / "device" / "include")


def compile_cxx(source: str, name: str = "kernel") -> bytes:
    cxx = env.cxx()
    with tempfile.TemporaryDirectory(prefix="tilecraft-cxx-") as tmp:
        src = os.path.join(tmp, f"{name}.cpp")
        out = os.path.join(tmp, f"{name}.so")
        with open(src, "w") as f:
            f.write(source)
        cmd = [cxx, *FLAGS, "-I", include_dir(), src, "-o", out]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except FileNotFoundError:
            raise CxxCompileError(f"C++ compiler {cxx!r} not found; install g++ or set TILECRAFT_CXX",
                                  source, name=f"{name}.cpp", compiler=cxx) from None
        if proc.returncode != 0:
            raise CxxCompileError(proc.stderr or proc.stdout, source, name=f"{name}.cpp", compiler=cxx)
        with open(out, "rb") as f:
            return f.read()

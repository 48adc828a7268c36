"""C++ compilation for the CPU target: generated source → shared library bytes.

Uses the system C++ compiler (`env.cxx()`), optimised for the machine it runs on, with OpenMP so
the blocks of a kernel run in parallel.  The library is returned as bytes and stored in the disk
cache, from where it is loaded with ctypes.

Compile time: parsing `tilecraft_cpu.h` and the standard headers it includes cost about as much
as compiling a kernel, so the header is precompiled (a GCC `.gch`) once per compiler, flags and
header text, into `<cache_dir>/cxx-pch/<key>/`, under a file lock; a kernel's compile then finds
it first on the include path.  A compiler that cannot make or use one (clang reads no `.gch`
through `-I`) compiles from the header as before: the PCH only ever saves time.

Flags and why: `-march=native` (AVX2 vectors for the tile loops and the GEMM micro-kernel; the
machine is part of the kernel cache key, `cache.toolchain_key`); `-ffp-contract=off` (no fused
multiply-adds the program did not write: a*b+c rounds twice, as on every machine, so results do
not depend on the host's FMA units); `-fno-trapping-math` (floating-point exceptions are never
observed, so a loop with a select on a comparison -- a clamp, a NaN test, 16-bit conversions --
can be if-converted and vectorized; values are unchanged); `-fno-strict-aliasing` (a T.view names a tile's bytes with
another element type, and the CPU target's reference semantics must hold for it as on the GPU).
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from .. import env
from .errors import CxxCompileError

HEADER = "tilecraft_cpu.h"
_ARCH = ["-march=native"] if platform.machine() in ("x86_64", "AMD64") else []
# the flags a translation unit is compiled with (the PCH must be made with exactly these)
CFLAGS = ["-O2", *_ARCH, "-std=c++17", "-fPIC", "-fopenmp", "-fno-math-errno", "-ffp-contract=off",
          "-fno-trapping-math", "-fno-strict-aliasing", "-w"]
FLAGS = [*CFLAGS, "-shared"]


def include_dir() -> str:
    return str(Path(__file__).resolve().parent.parent / "device" / "include")


def _pch_key(cxx: str) -> str:
    from .cache import toolchain_key
    h = hashlib.sha256(repr((toolchain_key(None), cxx, CFLAGS)).encode())
    for path in sorted(Path(include_dir()).glob("tilecraft_cpu*.h")):  # the header and those it includes
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:32]


_PCH: dict = {}


def pch_dir(cxx: str) -> str | None:
    """The folder holding `tilecraft_cpu.h` and its `.gch` for this compiler and these flags (built
    on first use, under a file lock); None when it cannot be made here."""
    if cxx in _PCH:
        return _PCH[cxx]
    _PCH[cxx] = None
    try:
        key = _pch_key(cxx)
        root = Path(env.cache_dir()) / "cxx-pch"
        final = root / key
        gch = final / (HEADER + ".gch")
        if not gch.is_file():
            from filelock import FileLock
            root.mkdir(parents=True, exist_ok=True)
            with FileLock(str(root / f"{key}.lock")):
                if not gch.is_file():
                    _build_pch(cxx, root, final)
        _PCH[cxx] = str(final) if gch.is_file() else None
    except (OSError, subprocess.SubprocessError, ImportError):
        _PCH[cxx] = None
    return _PCH[cxx]


def _build_pch(cxx: str, root: Path, final: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=root))
    try:
        shutil.copy(Path(include_dir()) / HEADER, tmp / HEADER)
        proc = subprocess.run([cxx, *CFLAGS, "-I", include_dir(), "-x", "c++-header", str(tmp / HEADER),
                               "-o", str(tmp / (HEADER + ".gch"))],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode == 0 and (tmp / (HEADER + ".gch")).is_file():
            os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compile_cxx(source: str, name: str = "kernel") -> bytes:
    cxx = env.cxx()
    pch = pch_dir(cxx)
    with tempfile.TemporaryDirectory(prefix="tilecraft-cxx-") as tmp:
        src = os.path.join(tmp, f"{name}.cpp")
        out = os.path.join(tmp, f"{name}.so")
        with open(src, "w") as f:
            f.write(source)
        cmd = [cxx, *FLAGS, *(["-I", pch] if pch else []), "-I", include_dir(), src, "-o", out]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except FileNotFoundError:
            raise CxxCompileError(f"C++ compiler {cxx!r} not found; install g++ or set TILECRAFT_CXX",
                                  source, name=f"{name}.cpp", compiler=cxx) from None
        if proc.returncode != 0:
            raise CxxCompileError(proc.stderr or proc.stdout, source, name=f"{name}.cpp", compiler=cxx)
        with open(out, "rb") as f:
            return f.read()

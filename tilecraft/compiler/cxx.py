"""C++ compilation for the CPU target: generated source → shared library bytes.

Uses the system C++ compiler (`env.cxx()`), optimised for the machine it runs on, with OpenMP so
the blocks of a kernel run in parallel.  The library is returned as bytes and stored in the disk
cache, from where it is loaded with ctypes.

Compile time: parsing `tilecraft_cpu.h` and the standard headers it includes cost about as much
as compiling a kernel, so the header is precompiled (a GCC `.gch`) once per compiler, flags and
header text, into `<cache_dir>/cxx-pch/<key>/`, under a file lock; a kernel's compile then finds
it first on the include path.  A compiler that cannot make or use one (clang reads no `.gch`
through `-I`) compiles from the header as before: the PCH only ever saves time.  The same build
checks once whether gold links a kernel library here: GNU ld (BFD) spends about 0.13 CPU-s on every
kernel reading libstdc++ and libgomp, gold 0.03 (the library's code is the same).

Not done, measured (2026-12-02): compiling the tile GEMM's common instantiations once into a static
archive that kernels link (`extern template`) saves 0.27 CPU-s per GEMM kernel's compile but makes
FlashAttention 35 % slower: the kernel's own `static` instantiation is inlined with its constant
sizes and strides, which the shared one cannot be.

Flags and why: `-march=native` (AVX2 / AVX-512 vectors for the tile loops and the GEMM micro-kernel; the
machine is part of the kernel cache key, `cache.toolchain_key`); `-mprefer-vector-width=512` (GCC's
tuning for recent Intel cores stops at 256-bit vectors; with 512 the softmax kernel ran 0.50-0.52x ->
0.61-0.63x torch and FlashAttention 0.35-0.47x -> 0.50-0.53x, thread CPU time, session 20; each lane
computes what it did, and the reductions' lane order is fixed in the header, so results do not change); `-ffp-contract=off` (no fused
multiply-adds the program did not write: a*b+c rounds twice, as on every machine, so results do
not depend on the host's FMA units; T.gemm's chain is fused on purpose, through tc::fma and the
micro-kernel's vfmadd, which give the same bits with or without FMA units); `-fno-trapping-math` (floating-point exceptions are never
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
_ARCH = ["-march=native", "-mprefer-vector-width=512"] if platform.machine() in ("x86_64", "AMD64") else []
# the flags a translation unit is compiled with (the PCH must be made with exactly these).
# -funswitch-loops (an -O3 pass): an inner loop under a condition of the outer loops only -- the row
# guard of a tile whose rows pass the tensor's end -- is split into a guarded and an unguarded loop,
# so the common one vectorizes: softmax 301x1000 fp16 0.62 -> 0.20 ms; compile time within noise.
CFLAGS = ["-O2", "-funswitch-loops", *_ARCH, "-std=c++17", "-fPIC", "-fopenmp", "-fno-math-errno",
          "-ffp-contract=off", "-fno-trapping-math", "-fno-strict-aliasing", "-w"]


def include_dir() -> str:
    return str(Path(__file__).resolve().parent.parent / "device" / "include")


GOLD = "-fuse-ld=gold"
LDFLAGS_FILE = "ldflags"


def _pch_key(cxx: str) -> str:
    from .cache import toolchain_key
    h = hashlib.sha256(repr((toolchain_key(None), cxx, CFLAGS, LDFLAGS_FILE)).encode())
    for path in sorted(Path(include_dir()).glob("tilecraft_cpu*.h")):  # the header and those it includes
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:32]


class CpuRuntime:
    """What a kernel's compile finds in `<cache_dir>/cxx-pch/<key>/`: `folder` (None: nothing could
    be made here), `pch` (the `.gch` is there) and `ldflags` (the linker, when gold links here)."""

    def __init__(self, folder: str | None):
        self.folder = folder
        self.pch = bool(folder) and (Path(folder) / (HEADER + ".gch")).is_file()
        ld = Path(folder) / LDFLAGS_FILE if folder else None
        self.ldflags = ld.read_text().split() if ld is not None and ld.is_file() else []


_RT: dict = {}


def cpu_runtime(cxx: str) -> CpuRuntime:
    """The precompiled header and the linker choice for this compiler and these flags (made on first
    use, under a file lock; a folder with neither is not kept, and the next process tries again)."""
    if cxx in _RT:
        return _RT[cxx]
    _RT[cxx] = CpuRuntime(None)
    try:
        key = _pch_key(cxx)
        root = Path(env.cache_dir()) / "cxx-pch"
        final = root / key
        if not final.is_dir():
            from filelock import FileLock
            root.mkdir(parents=True, exist_ok=True)
            with FileLock(str(root / f"{key}.lock")):
                if not final.is_dir():
                    _build(cxx, root, final)
        _RT[cxx] = CpuRuntime(str(final) if final.is_dir() else None)
    except (OSError, subprocess.SubprocessError, ImportError):
        pass
    return _RT[cxx]


def pch_dir(cxx: str) -> str | None:
    """The folder holding `tilecraft_cpu.h` and its `.gch` for this compiler (made on first use);
    None when none can be made here."""
    rt = cpu_runtime(cxx)
    return rt.folder if rt.pch else None


def _run(cmd: list) -> bool:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return proc.returncode == 0


def _loads(lib: Path) -> bool:
    """The probe library loads and computes sum(range(5)) on OpenMP threads."""
    import ctypes
    try:
        return ctypes.CDLL(str(lib)).tc_probe(5) == 10
    except (OSError, AttributeError):
        return False


def _build(cxx: str, root: Path, final: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=root))
    try:
        shutil.copy(Path(include_dir()) / HEADER, tmp / HEADER)
        _run([cxx, *CFLAGS, "-I", include_dir(), "-x", "c++-header", str(tmp / HEADER),
              "-o", str(tmp / (HEADER + ".gch"))])
        # a library that uses OpenMP and the C++ runtime, as kernels do, linked by gold
        probe = tmp / "probe.cpp"
        probe.write_text('#include <vector>\nextern "C" int tc_probe(int n) {\n  std::vector<int> v(n);\n'
                         '  int s = 0;\n#pragma omp parallel for reduction(+ : s)\n'
                         '  for (int i = 0; i < n; ++i) s += v[i] + i;\n  return s;\n}\n')
        if _run([cxx, *CFLAGS, "-shared", GOLD, str(probe), "-o", str(tmp / "probe.so")]) and _loads(tmp / "probe.so"):
            (tmp / LDFLAGS_FILE).write_text(GOLD + "\n")
        for leftover in ("probe.cpp", "probe.so"):
            (tmp / leftover).unlink(missing_ok=True)
        if (tmp / (HEADER + ".gch")).is_file() or (tmp / LDFLAGS_FILE).is_file():
            os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compile_cxx(source: str, name: str = "kernel") -> bytes:
    cxx = env.cxx()
    rt = cpu_runtime(cxx)
    with tempfile.TemporaryDirectory(prefix="tilecraft-cxx-") as tmp:
        src = os.path.join(tmp, f"{name}.cpp")
        out = os.path.join(tmp, f"{name}.so")
        with open(src, "w") as f:
            f.write(source)
        cmd = [cxx, *CFLAGS, "-shared", *(["-I", rt.folder] if rt.pch else []), "-I", include_dir(), src,
               *rt.ldflags, "-o", out]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except FileNotFoundError:
            raise CxxCompileError(f"C++ compiler {cxx!r} not found; install g++ or set TILECRAFT_CXX",
                                  source, name=f"{name}.cpp", compiler=cxx) from None
        if proc.returncode != 0:
            raise CxxCompileError(proc.stderr or proc.stdout, source, name=f"{name}.cpp", compiler=cxx)
        with open(out, "rb") as f:
            return f.read()

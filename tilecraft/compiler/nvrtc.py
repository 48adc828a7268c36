"""CUDA C++ -> cubin through NVRTC (the default CUDA compiler: in-process, no temp files, fast).

NVRTC compiles device code only and has no host headers; the CUDA headers it does need
(cuda_fp16.h, cuda_bf16.h, included by the tilecraft device library) are found on disk by
:func:`cuda_include_dirs`.  The output is a cubin for one real architecture (``sm_80``..``sm_90a``)
so the driver never has to JIT PTX: a cubin produced by a newer NVRTC minor version loads on an
older driver of the same major version, PTX would not.
"""
from __future__ import annotations

import dataclasses
import functools
import glob
import importlib.util
import os
import re
import shutil
import time
from typing import Sequence

from .errors import CudaCompileError

__all__ = ["CudaBinary", "compile_cuda_nvrtc", "cuda_include_dirs", "parse_arch", "nvrtc_version"]

_ARCH_RE = re.compile(r"^(?:sm_|sm|compute_)?(\d{2,3})([af]?)$")


@dataclasses.dataclass(frozen=True)
class CudaBinary:
    """A compiled kernel image.  ``arch`` is normalised (``sm_90a``); ``compiler`` is ``nvrtc``
    or ``nvcc``; ``log`` holds warnings (empty when clean); ``seconds`` the compile wall time."""

    cubin: bytes
    log: str
    arch: str
    compiler: str
    seconds: float = 0.0
    ptx: str | None = None

    def __repr__(self) -> str:  # the cubin bytes are not worth printing
        return (f"CudaBinary(arch={self.arch!r}, compiler={self.compiler!r}, "
                f"{len(self.cubin)} bytes, {self.seconds * 1e3:.0f} ms)")


def parse_arch(arch: str) -> tuple[str, str]:
    """``"sm_90a"``/``"90a"``/``"compute_90a"`` -> ``("90", "a")``.  Only real (sm_) targets make
    a cubin; the suffix ``a`` selects arch-specific features (wgmma, setmaxnreg) that exist on
    exactly that chip, ``f`` the family-portable subset (sm_100+)."""
    m = _ARCH_RE.match(str(arch).strip().lower())
    if not m:
        raise ValueError(f"unrecognised CUDA architecture {arch!r}; expected e.g. 'sm_80' or 'sm_90a'")
    return m.group(1), m.group(2)


def _normalise_arch(arch: str) -> str:
    num, suffix = parse_arch(arch)
    return f"sm_{num}{suffix}"


def _cuda_home() -> str | None:
    """CUDA_HOME / CUDA_PATH (or TILECRAFT_CUDA_HOME) through the project's knob module."""
    try:
        from tilecraft import env
        home = env.cuda_home()
    except Exception:  # a malformed value must not stop the search for other locations
        return None
    return str(home) if home else None


def _has_fp16_headers(d: str) -> bool:
    return os.path.isfile(os.path.join(d, "cuda_fp16.h")) and os.path.isfile(os.path.join(d, "cuda_bf16.h"))


def _candidate_include_dirs() -> list[str]:
    """Directories that may hold the CUDA toolkit headers, most preferred first: the pip
    ``nvidia`` packages (installed next to the pip NVRTC, so versions match), CUDA_HOME /
    CUDA_PATH, the toolkit next to nvcc, then the usual system locations."""
    out: list[str] = []
    spec = importlib.util.find_spec("nvidia")
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            for sub in ("cu13", "cu12", "cuda_runtime", "cuda_nvrtc", "cuda_nvcc"):
                out.append(os.path.join(root, sub, "include"))
    home = _cuda_home()
    if home:
        out.append(os.path.join(home, "include"))
    nvcc = shutil.which("nvcc")
    if nvcc:
        out.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include"))
    out.append("/usr/local/cuda/include")
    out += sorted(glob.glob("/usr/local/cuda-*/include"), reverse=True)
    out += ["/opt/cuda/include", "/usr/include"]
    return out


@functools.lru_cache(maxsize=None)
def cuda_include_dirs() -> tuple[str, ...]:
    """The ``-I`` directories NVRTC needs for cuda_fp16.h / cuda_bf16.h (cached; empty when the
    NVRTC build has them built in).  Raises CudaCompileError naming what to install when none is
    found."""
    for d in _candidate_include_dirs():
        if _has_fp16_headers(d):
            return (os.path.realpath(d),)
    if _nvrtc_has_builtin_fp16():
        return ()
    raise CudaCompileError(
        "cannot find cuda_fp16.h / cuda_bf16.h for NVRTC. Install the CUDA runtime headers "
        "(`pip install nvidia-cuda-runtime` for CUDA 13, `nvidia-cuda-runtime-cu12` for CUDA 12) "
        "or a CUDA toolkit and set CUDA_HOME. Searched: " + ", ".join(_candidate_include_dirs()),
        compiler="nvrtc")


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:  # pragma: no cover - depends on the install
        raise CudaCompileError(
            f"NVRTC is unavailable ({e}); install `cuda-bindings` and `nvidia-cuda-nvrtc`",
            compiler="nvrtc") from None
    return nvrtc


def _check(result, what: str):
    err = result[0]
    if err:  # NVRTC_SUCCESS == 0
        nvrtc = _nvrtc()
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise CudaCompileError(f"{what} failed: {msg.decode(errors='replace')}", compiler="nvrtc")
    return result[1] if len(result) == 2 else result[1:]


@functools.lru_cache(maxsize=None)
def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the loaded NVRTC library (part of cache keys upstream)."""
    try:
        major, minor = _check(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    except CudaCompileError:
        raise
    except Exception as e:  # library not found: cuda.pathfinder raises its own errors
        raise CudaCompileError(f"NVRTC library could not be loaded ({e}); install "
                               "`nvidia-cuda-nvrtc` (CUDA 13) or a CUDA toolkit", compiler="nvrtc") from None
    return int(major), int(minor)


def _nvrtc_has_builtin_fp16() -> bool:
    try:
        _run_nvrtc(b"#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n", b"probe.cu",
                   [b"--gpu-architecture=compute_80", b"-default-device"], want_cubin=False)
        return True
    except CudaCompileError:
        return False


def _run_nvrtc(src: bytes, name: bytes, opts: list[bytes], want_cubin: bool = True):
    """Compile; return (cubin or None, log, ptx or None).  Raises CudaCompileError on failure."""
    nvrtc = _nvrtc()
    nvrtc_version()  # turns a missing library into a clear error
    prog = _check(nvrtc.nvrtcCreateProgram(src, name, 0, [], []), "nvrtcCreateProgram")
    try:
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        buf = bytearray(size)  # never b" " * n: tiny bytes objects are interned
        _check(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
        log = bytes(buf).rstrip(b"\0").decode(errors="replace")
        if status:
            raise CudaCompileError(log, src.decode(errors="replace"), name=name.decode(),
                                   compiler="nvrtc")
        cubin = ptx = None
        if want_cubin:
            size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            cbuf = bytearray(size)
            _check(nvrtc.nvrtcGetCUBIN(prog, cbuf), "nvrtcGetCUBIN")
            cubin = bytes(cbuf)
            ptx_size = nvrtc.nvrtcGetPTXSize(prog)
            if not ptx_size[0] and ptx_size[1] > 1:
                pbuf = bytearray(ptx_size[1])
                if not nvrtc.nvrtcGetPTX(prog, pbuf)[0]:
                    ptx = bytes(pbuf).rstrip(b"\0").decode(errors="replace")
        return cubin, log, ptx
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def compile_cuda_nvrtc(source: str, arch: str, *, include_dirs: Sequence[str] = (),
                       options: Sequence[str] = (), name: str = "kernel.cu",
                       fast_math: bool = False, lineinfo: bool = False) -> CudaBinary:
    """Compile CUDA C++ ``source`` for the real architecture ``arch`` (``sm_80``, ``sm_86``,
    ``sm_89``, ``sm_90``, ``sm_90a``...) into a cubin.

    The tilecraft device headers and the CUDA headers are always on the include path (before
    ``include_dirs``); ``options`` are passed to NVRTC verbatim after the defaults
    (``-default-device --std=c++17``).  Kernels should be ``extern "C"`` so their names are
    not mangled.  Raises :class:`CudaCompileError` with the log and the source lines around the
    first error.
    """
    from tilecraft.device import include_dir

    arch = _normalise_arch(arch)
    opts = [f"--gpu-architecture={arch}", "-default-device", "--std=c++17"]
    if fast_math:
        opts.append("--use_fast_math")
    if lineinfo:
        opts.append("-lineinfo")
    for d in (include_dir(), *cuda_include_dirs(), *include_dirs):
        opts.append(f"-I{d}")
    opts += list(options)
    t0 = time.perf_counter()
    from .nvrtc_pch import compile_with_pch
    src, fname = source.encode(), name.encode()
    try:
        cubin, log, ptx = compile_with_pch(lambda o: _run_nvrtc(src, fname, [x.encode() for x in o]), source, opts)
    except CudaCompileError as e:
        if e.source:  # re-raise with the arch and the caller's exact source text
            raise CudaCompileError(e.log, source, name=name, compiler="nvrtc", arch=arch) from None
        raise
    return CudaBinary(cubin=cubin, log=log.strip(), arch=arch, compiler="nvrtc",
                      seconds=time.perf_counter() - t0, ptx=ptx)

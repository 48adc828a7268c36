"""CUDA C++ -> cubin through nvcc (an option next to NVRTC: same inputs, same CudaBinary).

nvcc is a separate process with a temp directory, so it costs ~0.3-1 s more per kernel than
NVRTC; it is useful to cross-check NVRTC and where a toolkit but no pip NVRTC is installed.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import time
from typing import Sequence

from .errors import CudaCompileError
from .nvrtc import CudaBinary, _cuda_home, parse_arch

__all__ = ["compile_cuda_nvcc", "find_nvcc"]


@functools.lru_cache(maxsize=None)
def find_nvcc() -> str | None:
    """Path of nvcc: PATH, then CUDA_HOME/CUDA_PATH, then /usr/local/cuda/bin; None if absent."""
    found = shutil.which("nvcc")
    if found:
        return found
    home = _cuda_home()
    for root in ([home] if home else []) + ["/usr/local/cuda", "/opt/cuda"]:
        cand = os.path.join(root, "bin", "nvcc")
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def compile_cuda_nvcc(source: str, arch: str, *, include_dirs: Sequence[str] = (),
                      options: Sequence[str] = (), name: str = "kernel.cu",
                      fast_math: bool = False, lineinfo: bool = False) -> CudaBinary:
    """Compile ``source`` with ``nvcc -cubin`` for the real architecture ``arch``.

    Uses ``-gencode=arch=compute_XX[a],code=sm_XX[a]`` (the ``a`` variants must be named on both
    sides: sm_90a SASS can only come from compute_90a PTX), ``-O3`` and ``--std=c++17``;
    ``--use_fast_math`` only when ``fast_math``.  The tilecraft device headers are on the include
    path.  Raises :class:`CudaCompileError` with the log and source excerpt on failure.
    """
    from tilecraft.device import include_dir

    nvcc = find_nvcc()
    if nvcc is None:
        raise CudaCompileError("nvcc not found on PATH, in CUDA_HOME/bin or /usr/local/cuda/bin; "
                               "install the CUDA toolkit or use the NVRTC compiler", compiler="nvcc")
    num, suffix = parse_arch(arch)
    arch = f"sm_{num}{suffix}"
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tilecraft_nvcc_") as tmp:
        src_path = os.path.join(tmp, os.path.basename(name))
        out_path = os.path.join(tmp, "out.cubin")
        with open(src_path, "w") as f:
            f.write(source)
        cmd = [nvcc, "-cubin", f"-gencode=arch=compute_{num}{suffix},code=sm_{num}{suffix}",
               "-O3", "--std=c++17", f"-I{include_dir()}"]
        cmd += [f"-I{d}" for d in include_dirs]
        if fast_math:
            cmd.append("--use_fast_math")
        if lineinfo:
            cmd.append("-lineinfo")
        cmd += list(options) + ["-o", out_path, src_path]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        # nvcc prints paths of the temp file; show the plain name instead.
        log = (proc.stdout + proc.stderr).replace(src_path, os.path.basename(name)).strip()
        if proc.returncode != 0 or not os.path.isfile(out_path):
            raise CudaCompileError(log or f"nvcc exited with status {proc.returncode}", source,
                                   name=os.path.basename(name), compiler="nvcc", arch=arch)
        with open(out_path, "rb") as f:
            cubin = f.read()
    return CudaBinary(cubin=cubin, log=log, arch=arch, compiler="nvcc",
                      seconds=time.perf_counter() - t0)

"""SASS disassembly and resource usage of a cubin, for tests and ``kernel.show_sass()``.

Since CUDA 12.x ``cuobjdump -sass`` delegates the disassembly to ``nvdisasm`` (found through
PATH or NVDISASM_PATH), so both tools are looked up: PATH, CUDA_HOME/CUDA_PATH, the toolkit next
to nvcc, /usr/local/cuda/bin, and the pip wheels ``nvidia-cuda-cuobjdump`` /
``nvidia-cuda-nvdisasm`` (which install into ``site-packages/nvidia/cu13/bin``).  Needs no GPU.
"""
from __future__ import annotations

import functools
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile

from .nvrtc import _cuda_home

__all__ = ["disassemble", "resource_usage", "find_cuda_tool", "sass_opcodes"]

_INSTALL_HINT = ("install the CUDA toolkit (and put its bin/ on PATH or set CUDA_HOME), or "
                 "`pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`")


def _candidate_bin_dirs() -> list[str]:
    dirs: list[str] = []
    home = _cuda_home()
    if home:
        dirs.append(os.path.join(home, "bin"))
    nvcc = shutil.which("nvcc")
    if nvcc:  # /usr/local/bin/nvcc may be a wrapper script: try both its dir and its target's
        dirs += [os.path.dirname(nvcc), os.path.dirname(os.path.realpath(nvcc))]
    dirs += ["/usr/local/cuda/bin", *sorted(glob.glob("/usr/local/cuda-*/bin"), reverse=True)]
    spec = importlib.util.find_spec("nvidia")
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            for sub in ("cu13", "cu12", "cuda_cuobjdump", "cuda_nvdisasm", "cuda_nvcc"):
                dirs.append(os.path.join(root, sub, "bin"))
    return dirs


@functools.lru_cache(maxsize=None)
def find_cuda_tool(name: str) -> str | None:
    """Absolute path of a CUDA binary utility (``cuobjdump``, ``nvdisasm``...), or None."""
    found = shutil.which(name)
    if found:
        return found
    for d in _candidate_bin_dirs():
        cand = os.path.join(d, name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def _run_on_cubin(args: list[str], cubin: bytes, env: dict | None = None) -> str:
    with tempfile.TemporaryDirectory(prefix="tilecraft_sass_") as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        proc = subprocess.run([*args, path], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip()
        if "nvdisasm" in msg:
            msg += f"\n(cuobjdump needs nvdisasm to print SASS: {_INSTALL_HINT})"
        raise RuntimeError(f"{os.path.basename(args[0])} failed: {msg}")
    return proc.stdout


def disassemble(cubin: bytes) -> str:
    """SASS text of every kernel in ``cubin`` (cuobjdump -sass format when cuobjdump exists,
    otherwise nvdisasm's).  Raises RuntimeError saying what to install when no tool is found.
    The last few answers are kept: nvdisasm's start costs ~0.25 CPU-s whatever the cubin's size."""
    return _disassemble(cubin, find_cuda_tool("cuobjdump"), find_cuda_tool("nvdisasm"))


@functools.lru_cache(maxsize=16)
def _disassemble(cubin: bytes, cuobjdump: str | None, nvdisasm: str | None) -> str:
    if cuobjdump is not None:
        env = None
        if nvdisasm is not None:
            env = dict(os.environ)
            env["NVDISASM_PATH"] = nvdisasm
            env["PATH"] = os.path.dirname(nvdisasm) + os.pathsep + env.get("PATH", "")
        return _run_on_cubin([cuobjdump, "-sass"], cubin, env)
    if nvdisasm is not None:
        return _run_on_cubin([nvdisasm], cubin)
    raise RuntimeError(f"cannot disassemble: neither cuobjdump nor nvdisasm was found; {_INSTALL_HINT}")


_SASS_INSN_RE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")


def sass_opcodes(sass: str) -> list[str]:
    """The instruction mnemonics (with modifiers, e.g. ``HMMA.16816.F32``) in SASS text, in order;
    predicates like ``@P0`` are stripped.  Tests assert on these."""
    return _SASS_INSN_RE.findall(sass)


_FUNC_RE = re.compile(r"^\s*Function\s+(\S+):\s*$")
_FIELD_RE = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")
_FIELD_NAMES = {"REG": "registers", "SHARED": "shared_bytes", "LOCAL": "local_bytes",
                "STACK": "stack_bytes", "CONSTANT[0]": "constant0_bytes"}


def resource_usage(cubin: bytes) -> dict[str, dict[str, int]]:
    """Per-kernel resource usage from ``cuobjdump --dump-resource-usage`` (no nvdisasm needed):
    ``{kernel: {"registers", "shared_bytes" (static), "local_bytes", "stack_bytes",
    "constant0_bytes"}}``.  ``local_bytes > 0`` means register spills or a local array indexed
    dynamically — both slow, and worth a warning from the caller."""
    cuobjdump = find_cuda_tool("cuobjdump")
    if cuobjdump is None:
        raise RuntimeError(f"cannot read resource usage: cuobjdump was not found; {_INSTALL_HINT}")
    text = _run_on_cubin([cuobjdump, "--dump-resource-usage"], cubin)
    out: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _FUNC_RE.match(line)
        if m:
            current = m.group(1)
            continue
        if current is not None and "REG:" in line:
            fields = dict(_FIELD_RE.findall(line))
            out[current] = {key: int(fields.get(raw, 0)) for raw, key in _FIELD_NAMES.items()}
            current = None
    return out

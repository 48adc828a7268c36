"""Compiler errors: what the user sees when NVRTC, nvcc or the C++ compiler rejects a source.

The message always carries the compiler log and the generated source around the first error
line (with line numbers), so a codegen bug can be diagnosed from the exception text alone.
"""
from __future__ import annotations

import re

__all__ = ["CompileError", "CudaCompileError", "CxxCompileError", "source_excerpt", "first_error_line"]

# "kernel.cu(12): error: ..." (NVRTC, nvcc/EDG) and "kernel.cpp:12:5: error: ..." (gcc/clang).
_ERROR_LINE_RES = (
    re.compile(r"^[^\s(]*\((\d+)\):\s*(?:catastrophic )?error", re.MULTILINE),
    re.compile(r"^[^\s:]*:(\d+):(?:\d+:)?\s*(?:fatal )?error", re.MULTILINE),
)


def first_error_line(log: str, name: str | None = None) -> int | None:
    """1-based line number of the first error in ``log`` (in file ``name`` if given), or None."""
    for pattern in _ERROR_LINE_RES:
        for m in pattern.finditer(log):
            if name is None or m.group(0).startswith(name) or "/" + name in m.group(0):
                return int(m.group(1))
    return None


def source_excerpt(source: str, line: int | None, context: int = 4) -> str:
    """Lines ``line-context .. line+context`` of ``source`` numbered, the error line marked ``>``."""
    lines = source.splitlines()
    if not lines:
        return ""
    if line is None or not (1 <= line <= len(lines)):
        lo, hi, line = 1, min(len(lines), 2 * context + 1), -1
    else:
        lo, hi = max(1, line - context), min(len(lines), line + context)
    width = len(str(hi))
    return "\n".join(
        f"{'>' if i == line else ' '} {i:>{width}} | {lines[i - 1]}" for i in range(lo, hi + 1)
    )


class CompileError(Exception):
    """A generated source failed to compile.  ``log`` is the compiler output, ``source`` the
    full text that was compiled, ``line`` the first error line (None when unknown)."""

    what = "compile"

    def __init__(self, log: str, source: str = "", *, name: str = "kernel", compiler: str = "",
                 arch: str = "", line: int | None = None):
        self.log = log
        self.source = source
        self.name = name
        self.compiler = compiler
        self.arch = arch
        self.line = line if line is not None else first_error_line(log, name)
        super().__init__(self._format())

    def _format(self) -> str:
        where = f" for {self.arch}" if self.arch else ""
        head = f"{self.compiler or 'compiler'} failed to {self.what} {self.name}{where}"
        if self.line is not None:
            head += f" (first error at line {self.line})"
        parts = [head + ":", self.log.strip()]
        if self.source:
            parts += ["--- source ---", source_excerpt(self.source, self.line)]
        return "\n".join(parts)


class CudaCompileError(CompileError):
    """NVRTC or nvcc rejected a CUDA source (or the compiler itself could not be found/run)."""


class CxxCompileError(CompileError):
    """The host C++ compiler rejected a CPU-target source."""

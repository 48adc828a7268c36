"""Compilers from generated source to loadable binaries (no GPU needed for any of them).

CUDA: :func:`compile_cuda_nvrtc` (default, in-process) and :func:`compile_cuda_nvcc` both return a
:class:`CudaBinary` holding a cubin for one real architecture; :func:`disassemble` and
:func:`resource_usage` inspect it.  Failures raise :class:`CudaCompileError` (a
:class:`CompileError`) carrying the log and the source lines around the first error.
"""
from .errors import CompileError, CudaCompileError, CxxCompileError
from .nvcc import compile_cuda_nvcc, find_nvcc
from .nvrtc import CudaBinary, compile_cuda_nvrtc, cuda_include_dirs, nvrtc_version, parse_arch
from .sass import disassemble, find_cuda_tool, resource_usage, sass_opcodes

__all__ = [
    "CompileError", "CudaCompileError", "CxxCompileError",
    "CudaBinary", "compile_cuda_nvrtc", "compile_cuda_nvcc", "cuda_include_dirs", "nvrtc_version",
    "parse_arch", "find_nvcc", "disassemble", "resource_usage", "find_cuda_tool", "sass_opcodes",
]

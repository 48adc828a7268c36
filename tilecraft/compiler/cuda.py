"""Generated CUDA C++ -> cubin bytes: the one door `compiler.build` goes through for CUDA targets.

It picks the compiler from ``TILECRAFT_CUDA_COMPILER`` (:func:`tilecraft.env.cuda_compiler`:
NVRTC by default, in-process and fastest; nvcc as a cross-check or where no pip NVRTC exists) and
turns the pass configs that change code generation into compiler flags, so that both compilers
see the same options:

- always full optimisation (nvcc ``-O3``; NVRTC optimises by default, ``--dopt=on`` says so
  explicitly and ptxas gets ``-O3`` on both) and ``-lineinfo`` (no run-time cost; profilers and
  ``compute-sanitizer`` then map SASS back to source lines);
- ``--use_fast_math`` only when ``tl.enable_fast_math`` is set (and ``tl.disable_fast_math`` is
  not): it changes results (flushed denormals, approximate division/exp), so never by default;
- ``tl.enable_ptxas_verbose_output``: ptxas prints registers / spills / shared memory per kernel
  (printed to stdout after the compile);
- ``tl.ptxas_register_usage_level``: forwarded as ``-Xptxas --register-usage-level=N`` (0..10);
- ``tl.device_compile_flags`` (also ``jit(compile_flags=...)``): appended to the compiler options.

The architecture is the target's (``sm_80`` ... ``sm_90a``); the tilecraft device headers are on
the include path (both compilers add :func:`tilecraft.device.include_dir` first).
"""
from __future__ import annotations

from .. import env
from ..options import as_options
from .errors import CudaCompileError

__all__ = ["compile_cuda", "cuda_options"]


def _arch_of(target) -> str:
    arch = getattr(target, "arch", None) if not isinstance(target, str) else target
    if not arch:
        raise CudaCompileError(f"compile_cuda needs a CUDA target with an architecture, got {target!r}",
                               compiler=env.cuda_compiler())
    return str(arch)


def cuda_options(configs: dict | None, compiler: str) -> tuple[bool, list[str]]:
    """``(fast_math, extra options)`` for ``compiler`` ("nvrtc" or "nvcc") from the pass configs."""
    opts = as_options(configs)
    fast_math = opts.fast_math
    ptxas: list[str] = ["-O3"]
    if opts.enable_ptxas_verbose_output:
        ptxas.append("-v")
    level = opts.ptxas_register_usage_level
    if level is not None:
        level = int(level)
        if not 0 <= level <= 10:
            raise ValueError(f"tl.ptxas_register_usage_level must be in 0..10, got {level}")
        ptxas.append(f"--register-usage-level={level}")
    flags = ["--dopt=on"] if compiler == "nvrtc" else []  # nvcc gets -O3 from compile_cuda_nvcc
    for flag in ptxas:
        flags += ["-Xptxas", flag]
    user = list(opts.device_compile_flags)
    if compiler == "nvrtc":  # nvcc spellings NVRTC rejects: translated or dropped with a warning
        from .nvrtc_flags import nvrtc_flags
        user = nvrtc_flags(user)
    return fast_math, flags + user


def compile_cuda(source: str, target, configs: dict | None = None, *, name: str = "kernel.cu") -> bytes:
    """Compile ``source`` for ``target`` (a :class:`tilecraft.target.Target` or an arch string)
    with the configured compiler and return the cubin bytes.

    Raises :class:`~tilecraft.compiler.errors.CudaCompileError` (log + source excerpt) on failure.
    """
    compiler = env.cuda_compiler()
    arch = _arch_of(target)
    fast_math, options = cuda_options(configs, compiler)
    if compiler == "nvcc":
        from .nvcc import compile_cuda_nvcc as compile_fn
    else:
        from .nvrtc import compile_cuda_nvrtc as compile_fn
    binary = compile_fn(source, arch, options=options, name=name, fast_math=fast_math, lineinfo=True)
    if binary.log and (as_options(configs).enable_ptxas_verbose_output or env.verbose()):
        print(f"[tilecraft] {binary.compiler} {arch} ({binary.seconds * 1e3:.0f} ms):\n{binary.log}")
    warn_performance_notes(binary.log, name, arch)
    return binary.cubin


def warn_performance_notes(log: str, name: str, arch: str) -> None:
    """Raise ptxas's "Potential Performance Loss" notes (e.g. C7514/C7515: wgmma serialised) as a
    PerformanceWarning naming the kernel: the kernel is correct, but not as fast as it should be."""
    import warnings

    from ..errors import PerformanceWarning
    for line in (log or "").splitlines():
        if "Potential Performance Loss" in line:
            note = line.split("info", 1)[-1].strip(" :")
            warnings.warn(PerformanceWarning(f"{name} ({arch}): ptxas: {note}"), stacklevel=3)

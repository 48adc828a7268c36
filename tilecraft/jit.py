"""Public entry points: `@tilecraft.jit` factories and `tilecraft.compile`.

A jit factory is the user's Python function that returns a `@T.prim_func`; its arguments are
compile-time constants.  Calling the factory compiles once per distinct argument set (memory
cache here, disk cache in `compiler.build`) and returns a `JITKernel`.
"""
from __future__ import annotations

import functools
import inspect
import threading

from . import env
from .compiler.build import build
from .errors import InternalCompilerError, TilecraftError
from .ir.func import PrimFunc
from .runtime.kernel import JITKernel
from .target import Target


_BACKENDS = ("auto", "dlpack", "ctypes", "cython", "nvrtc", "tvm_ffi", "torch", "cutedsl")
_WARNED_BACKENDS: set = set()


def jit_options(pass_configs=None, execution_backend=None, compile_flags=None, debug_root_path=None):
    """TileLang's `jit`/`compile` options folded into pass_configs (none is dropped silently):
    `compile_flags` become `tl.device_compile_flags` (CUDA compilers), `debug_root_path` becomes
    `cuda.kernels_output_dir` (the generated source is written there); `execution_backend` names
    TileLang's launch mechanisms: tilecraft always launches through its own runtime, so any choice
    but "auto" / "nvrtc" (tilecraft's default compiler) is warned about once."""
    configs = dict(pass_configs.given if hasattr(pass_configs, "given") else (pass_configs or {}))
    if compile_flags:
        flags = compile_flags.split() if isinstance(compile_flags, str) else list(compile_flags)
        old = configs.get("tl.device_compile_flags") or []
        configs["tl.device_compile_flags"] = (old.split() if isinstance(old, str) else list(old)) + flags
    if debug_root_path:
        configs.setdefault("cuda.kernels_output_dir", str(debug_root_path))
    if execution_backend is not None:
        if execution_backend not in _BACKENDS:
            raise ValueError(f"execution_backend={execution_backend!r} is not one of TileLang's backends "
                             f"{', '.join(_BACKENDS)}")
        if execution_backend not in ("auto", "nvrtc") and execution_backend not in _WARNED_BACKENDS:
            import warnings
            from .options import UnhonouredOptionWarning
            _WARNED_BACKENDS.add(execution_backend)
            warnings.warn(f"execution_backend={execution_backend!r} is ignored: tilecraft launches every kernel "
                          f"through its own runtime (CUDA driver API / a C++ shared object)",
                          UnhonouredOptionWarning, stacklevel=3)
    return configs or pass_configs


def compile(func, out_idx=None, target="auto", pass_configs=None, execution_backend=None,  # noqa: A001
            target_host=None, verbose=False, compile_flags=None, debug_root_path=None) -> JITKernel:
    """Compile a parsed `@T.prim_func` for `target` and return the callable kernel."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"tilecraft.compile expects a @T.prim_func, got {type(func).__name__}")
    pass_configs = jit_options(pass_configs, execution_backend, compile_flags, debug_root_path)
    tgt = Target.resolve(target)
    try:
        artifact = build(func, tgt, pass_configs)
        return JITKernel(func, artifact, out_idx=out_idx, pass_configs=pass_configs)
    except TilecraftError as e:
        raise e.with_traceback(None) from None
    except (NotImplementedError, AssertionError, KeyError, AttributeError, IndexError) as e:
        raise InternalCompilerError(
            f"internal compiler error while compiling {func.name} for {tgt}: {type(e).__name__}: {e}",
            func.span, hint="this is a tilecraft bug; please report it with the program") from e


def _freeze(value):
    """A hashable stand-in for factory arguments (lists, dicts, dtypes, torch dtypes)."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


class JITFactory:
    """The object `@tilecraft.jit` returns: call it with the factory's arguments."""

    def __init__(self, fn, out_idx=None, target="auto", pass_configs=None, **extra):
        self.fn = fn
        self.compile_kwargs = {"out_idx": out_idx, "target": target,
                               "pass_configs": jit_options(pass_configs, **extra)}
        self.signature = inspect.signature(fn)
        self._kernels: dict = {}
        self._lock = threading.Lock()
        self._body = None  # a KernelBodyJit when the function is the kernel itself (jit_eager.py)
        functools.update_wrapper(self, fn)

    def _key(self, args, kwargs):
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        # TILECRAFT_PASS_CONFIGS is read at every call, like every knob: a change means a new kernel;
        # so is a pinned default target (target.default_target) when this factory says "auto"
        from .target import default_target_key
        return (_freeze(tuple(bound.arguments.items())), repr(sorted(env.default_pass_configs().items())),
                default_target_key() if self.compile_kwargs["target"] in (None, "auto") else None)

    def __call__(self, *args, **kwargs) -> JITKernel:
        if self._body is None:
            from .jit_eager import KernelBodyJit, is_kernel_body_jit
            self._body = KernelBodyJit(self.fn) if is_kernel_body_jit(self.fn) else False
        if self._body:
            return self._call_kernel_body(args, kwargs)
        try:
            key = self._key(args, kwargs)
        except TypeError as e:
            raise TypeError(f"{self.fn.__name__}(): {e}") from None
        kernel = self._kernels.get(key)
        if kernel is not None:
            return kernel
        func = self.fn(*args, **kwargs)
        if not isinstance(func, PrimFunc):
            raise TypeError(f"@tilecraft.jit factory {self.fn.__name__} must return a @T.prim_func, "
                            f"got {type(func).__name__}")
        kernel = compile(func, **self.compile_kwargs)
        with self._lock:
            self._kernels[key] = kernel
        return kernel

    def _call_kernel_body(self, args, kwargs):
        """TileLang's kernel-body style (jit_eager.py): compile for the Python arguments, run on the tensors."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        names = self._body.tensor_names
        statics = {k: v for k, v in bound.arguments.items() if k not in names}
        from .target import default_target_key
        key = ("body", _freeze(tuple(statics.items())), repr(sorted(env.default_pass_configs().items())),
               default_target_key() if self.compile_kwargs["target"] in (None, "auto") else None)
        entry = self._kernels.get(key)
        if entry is None:
            func, order = self._body.build(bound.arguments)
            entry = (compile(func, **self.compile_kwargs), order)
            with self._lock:
                self._kernels[key] = entry
        kernel, order = entry
        return kernel(*[bound.arguments[n] for n in order])

    def get_tir(self, *args, **kwargs) -> PrimFunc:
        """The parsed program for these arguments, without compiling it."""
        return self.fn(*args, **kwargs)

    def __repr__(self):
        return f"<tilecraft.jit {self.fn.__name__} {self.compile_kwargs}>"


def jit(func=None, *, out_idx=None, target="auto", pass_configs=None, execution_backend=None,
        verbose=False, debug_root_path=None, compile_flags=None, target_host=None):
    """Decorator: `@tilecraft.jit(out_idx=[-1])` above a factory returning a `@T.prim_func`.
    `execution_backend`, `compile_flags`, `debug_root_path`: see `jit_options`."""
    def wrap(fn):
        return JITFactory(fn, out_idx=out_idx, target=target, pass_configs=pass_configs,
                          execution_backend=execution_backend, compile_flags=compile_flags,
                          debug_root_path=debug_root_path)
    if func is not None:
        return wrap(func)
    return wrap

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
from .transform.validate.outputs import warn_uninitialized_outputs


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
        kernel = JITKernel(func, artifact, out_idx=out_idx, pass_configs=pass_configs)
        warn_uninitialized_outputs(func, kernel.out_idx)
        return kernel
    except TilecraftError as e:
        raise e.with_traceback(None) from None
    except (NotImplementedError, AssertionError, KeyError, AttributeError, IndexError) as e:
        raise InternalCompilerError(
            f"compiler bug while compiling {func.name} for {tgt}: {type(e).__name__}: {e}",
            func.span, hint="this is a mistake in tilecraft, not in your program; please report it with the "
                            "program") from e


def _call_label(name: str, args, kwargs) -> str:
    """`matmul(1024, 1024, 1024, block_M=64)`: how the user made a kernel, for call-time errors."""
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    text = ", ".join(parts)
    return f"{name}({text if len(text) <= 60 else text[:57] + '...'})"


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


def _rebuild_jit_factory(fn, options):
    return JITFactory(fn, **options)


class JITFactory:
    """The object `@tilecraft.jit` returns (TileLang's `JITImpl`).

    Two styles, told apart by the function's body: a factory returning a `@T.prim_func` (calling it
    returns the `JITKernel` for those arguments), or the eager style whose body holds the kernel
    (jit_eager.py: calling it compiles for the tensors' shapes and runs it).  Both have
    `.compile(*args, **kwargs)` (the kernel, without running it), `.get_tir(...)`,
    `.get_kernel_source(...)`, `.get_profiler(...)` and `.par_compile(configs)`."""

    def __init__(self, fn, out_idx=None, target="auto", pass_configs=None, verbose=False, target_host=None, **extra):
        self._init_args = (fn, dict(out_idx=out_idx, target=target, pass_configs=pass_configs, verbose=verbose,
                                    target_host=target_host, **extra))
        self.fn = fn
        self.out_idx = out_idx
        self.target = target
        self.target_host = target_host  # accepted: the host side is tilecraft's own launcher
        self.verbose = verbose
        self.execution_backend = extra.get("execution_backend")
        self.compile_flags = extra.get("compile_flags")
        self.debug_root_path = extra.get("debug_root_path")
        self.compile_kwargs = {"out_idx": out_idx, "target": target,
                               "pass_configs": jit_options(pass_configs, **extra)}
        self.pass_configs = self.compile_kwargs["pass_configs"]
        self.signature = inspect.signature(fn)
        self._kernels: dict = {}
        self._lock = threading.Lock()
        self._body = None  # an EagerJit when the function is the kernel itself (jit_eager.py)
        functools.update_wrapper(self, fn)

    def __reduce__(self):
        """Pickled (e.g. to a Ray worker) as the function and the decorator's options; the copy
        starts with no compiled kernels of its own."""
        fn, options = self._init_args
        return (_rebuild_jit_factory, (fn, options))

    @property
    def func(self):
        """The decorated Python function (TileLang's `JITImpl.func`)."""
        return self.fn

    @property
    def func_source(self) -> str:
        """The decorated function's source text (TileLang's `JITImpl.func_source`)."""
        return inspect.getsource(self.fn)

    @property
    def mode(self) -> str:
        """"eager" (the body is the kernel) or "lazy" (the function returns a @T.prim_func)."""
        return "eager" if self._eager() else "lazy"

    def _eager(self):
        if self._body is None:
            from .jit_eager import EagerJit, is_kernel_body_jit
            if is_kernel_body_jit(self.fn):
                if self.out_idx is not None:
                    raise ValueError(f"@tilelang.jit(out_idx=...) on {self.fn.__name__}: out_idx is for functions "
                                     f"that return a @T.prim_func; in the eager style (the kernel in the function's "
                                     f"body) declare outputs with T.empty(...) and return them")
                self._body = EagerJit(self.fn, self.compile_kwargs)
                self._body._kernels = self._kernels  # one cache per jit object, whichever the style
            else:
                self._body = False
        return self._body

    def _key(self, args, kwargs):
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        # TILECRAFT_PASS_CONFIGS is read at every call, like every knob: a change means a new kernel;
        # so is a pinned default target (target.default_target) when this factory says "auto"
        # so is a CUDA post-processing callback registered since (tilelang.engine.callback)
        from .engine.callback import memo_key as postproc_key
        from .target import default_target_key
        return (_freeze(tuple(bound.arguments.items())), repr(sorted(env.default_pass_configs().items())),
                default_target_key() if self.compile_kwargs["target"] in (None, "auto") else None,
                postproc_key())

    def __call__(self, *args, **kwargs):
        """Eager style: compile for these arguments (once) and run; returns the T.empty outputs.
        Factory style: the JITKernel for these arguments."""
        body = self._eager()
        if body:
            try:
                return body(args, kwargs)
            except TilecraftError as e:
                raise e.with_traceback(None) from None
        return self.compile(*args, **kwargs)

    def compile(self, *args, **kwargs) -> JITKernel:
        """The kernel for these arguments, compiled (once) but not run.  Eager style: tensors may be
        left out when every `T.const` they would bind is given as a keyword (`.compile(M=1024, ...)`)."""
        body = self._eager()
        if body:
            try:
                return body.compile(args, kwargs)
            except TilecraftError as e:
                raise e.with_traceback(None) from None
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
        kernel.called_as(_call_label(self.fn.__name__, args, kwargs))
        with self._lock:
            self._kernels[key] = kernel
        return kernel

    def get_tir(self, *args, **kwargs) -> PrimFunc:
        """The parsed program for these arguments, without compiling it."""
        body = self._eager()
        if body:
            try:
                return body.get_tir(args, kwargs)
            except TilecraftError as e:
                raise e.with_traceback(None) from None
        return self.fn(*args, **kwargs)

    def get_kernel_source(self, *args, **kwargs) -> str:
        """The generated source of the kernel for these arguments (compiled if needed)."""
        return self.compile(*args, **kwargs).get_kernel_source()

    def get_profiler(self, *args, tensor_supply_type=None, **kwargs):
        """A profiler of the kernel for these arguments (`JITKernel.get_profiler`)."""
        return self.compile(*args, **kwargs).get_profiler(tensor_supply_type=tensor_supply_type)

    def par_compile(self, configs, num_workers=None, ignore_error=False) -> list:
        """Compile one kernel per config (a dict of keyword arguments, or a tuple of positional
        ones), on `num_workers` threads; in the configs' order.  With `ignore_error`, a config that
        fails to compile gives None (and a warning) instead of raising."""
        import concurrent.futures
        import os
        configs = list(configs)
        for c in configs:
            if not isinstance(c, (dict, tuple)):
                raise ValueError(f"par_compile: each config is a dict of keyword arguments or a tuple of "
                                 f"positional ones, got {type(c).__name__}")

        def one(c):
            return self.compile(*c) if isinstance(c, tuple) else self.compile(**c)

        workers = num_workers or min(len(configs), os.cpu_count() or 1) or 1
        with concurrent.futures.ThreadPoolExecutor(workers, "tc-par-compile") as pool:
            futures = [pool.submit(one, c) for c in configs]
            results = []
            for i, f in enumerate(futures):
                try:
                    results.append(f.result())
                except Exception as e:  # noqa: BLE001 - reported, or raised below
                    if not ignore_error:
                        raise
                    import warnings
                    warnings.warn(f"par_compile: config {i} ({configs[i]!r}) failed to compile: {e}", stacklevel=2)
                    results.append(None)
        return results

    def __repr__(self):
        return f"<tilecraft.jit {self.fn.__name__} {self.compile_kwargs}>"


def jit(func=None, *, out_idx=None, target="auto", pass_configs=None, execution_backend=None,
        verbose=False, debug_root_path=None, compile_flags=None, target_host=None):
    """Decorator: `@tilecraft.jit(out_idx=[-1])` above a factory returning a `@T.prim_func`.
    `execution_backend`, `compile_flags`, `debug_root_path`: see `jit_options`."""
    def wrap(fn):
        return JITFactory(fn, out_idx=out_idx, target=target, pass_configs=pass_configs, verbose=verbose,
                          target_host=target_host, execution_backend=execution_backend, compile_flags=compile_flags,
                          debug_root_path=debug_root_path)
    if func is not None:
        return wrap(func)
    return wrap

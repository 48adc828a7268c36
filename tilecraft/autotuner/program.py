"""How one config becomes a kernel: the only place that knows the jit/compile contract.

- A ``@tilelang.jit`` factory (it has ``.fn`` and ``.compile_kwargs``) is called as
  ``factory(*args, **kwargs, **config)`` and returns a JITKernel; its own in-memory and disk
  caches apply. If the tuner was given explicit compile args, the user's function is compiled
  with ``tilecraft.compile(fn(...), **compile_kwargs merged with them)`` instead.
- A plain function returning a prim_func is compiled with ``tilecraft.compile``.

In a worker process only the artifacts matter, so ``precompile`` runs the build step alone
(``compiler.build.build``: pipeline, codegen, compiler, disk cache) for the target resolved in the
parent, without loading anything onto a device; objects that are not tilecraft programs (test
stand-ins, other runtimes) are compiled the ordinary way.
"""

from __future__ import annotations

import functools
import inspect
import marshal
import os
import platform
from typing import Any, Callable

from ..compiler.cache import cache_key

__all__ = ["Program", "is_jit_factory", "fingerprint_function", "hardware_fingerprint"]

DEFAULT_COMPILE_ARGS = {"out_idx": None, "target": "auto", "pass_configs": None}


def is_jit_factory(obj: Any) -> bool:
    return callable(obj) and hasattr(obj, "fn") and hasattr(obj, "compile_kwargs")


def is_real_jit(obj: Any) -> bool:
    """A tilecraft ``@jit`` factory (not a stand-in with the same surface)."""
    from ..jit import JITFactory
    return isinstance(obj, JITFactory)


def _takes(fn: Callable, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _keyable(value: Any) -> bool:
    try:
        cache_key(value)
        return True
    except TypeError:
        return False


def fingerprint_function(fn: Callable) -> tuple:
    """What identifies a user's kernel function for the tuning-result cache: its source and the
    keyable values it closes over (a factory defined inside a function captures its settings)."""
    if isinstance(fn, functools.partial):  # the wrapped function plus the arguments bound to it
        bound = tuple(a if _keyable(a) else f"<{type(a).__qualname__}>" for a in fn.args)
        kw = tuple(sorted((k, v if _keyable(v) else f"<{type(v).__qualname__}>") for k, v in fn.keywords.items()))
        return ("partial", fingerprint_function(fn.func), bound, kw)
    try:
        source: Any = inspect.getsource(fn)
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        source = marshal.dumps(code) if code is not None else type(fn).__qualname__
    closure = []
    code = getattr(fn, "__code__", None)
    if code is not None and getattr(fn, "__closure__", None):
        for name, cell in zip(code.co_freevars, fn.__closure__):
            try:
                value = cell.cell_contents
            except ValueError:  # empty cell
                continue
            closure.append((name, value if _keyable(value) else f"<{type(value).__qualname__}>"))
    return (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None), source, tuple(closure))


def _target_kind(target: Any) -> str:
    if isinstance(target, dict):
        target = target.get("kind", "auto")
    kind = getattr(target, "kind", target)
    return str(kind).split()[0].lower() if kind is not None else "auto"


def hardware_fingerprint(target: Any) -> tuple:
    """The machine a tuning result is valid for: the GPU model for CUDA targets, else the CPU."""
    import torch

    kind = _target_kind(target)
    from ..target import cuda_available
    if kind in ("cuda", "auto") and cuda_available():
        dev = torch.cuda.current_device()
        return ("cuda", torch.cuda.get_device_name(dev), tuple(torch.cuda.get_device_capability(dev)))
    return ("cpu", platform.machine(), platform.processor(), os.cpu_count())


def _accepted(fn: Callable, kwargs: dict) -> dict:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


class Program:
    """A kernel function (or jit factory) with its fixed arguments; ``compile(config)`` builds one."""

    def __init__(self, kernel: Callable, args: tuple = (), kwargs: dict | None = None,
                 compile_args: dict | None = None):
        self.factory = kernel if is_jit_factory(kernel) else None
        self.fn: Callable = kernel.fn if self.factory is not None else kernel
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.explicit_compile_args = compile_args

    @property
    def name(self) -> str:
        return getattr(self.factory, "__name__", None) or getattr(self.fn, "__name__", "kernel")

    @property
    def compile_args(self) -> dict:
        """The compile options in force: defaults < the jit decorator's < set_compile_args'."""
        merged = dict(DEFAULT_COMPILE_ARGS)
        if self.factory is not None:
            merged.update(self.factory.compile_kwargs or {})
        merged.update(self.explicit_compile_args or {})
        return merged

    @property
    def through_factory(self) -> bool:
        return self.factory is not None and not self.explicit_compile_args

    def _call_kwargs(self, config: dict) -> dict:
        return {**self.kwargs, **self._split(config)[0]}

    def _split(self, config: dict) -> tuple[dict, dict | None]:
        """(the function's keyword arguments, the config's own pass_configs or None): a config may carry
        `"pass_configs": {...}` (TileLang's per-config compiler options in the search space), compiled
        with those options over the compile args' ones, unless the function itself takes `pass_configs`."""
        if ("pass_configs" not in config or _takes(self.fn, "pass_configs")
                or (self.through_factory and not is_real_jit(self.factory))):  # a stand-in gets it as given
            return dict(config), None
        extra = config["pass_configs"]
        if extra is not None and not isinstance(extra, dict):
            raise TypeError(f"autotune: a config's pass_configs must be a dict, got {extra!r}")
        return {k: v for k, v in config.items() if k != "pass_configs"}, dict(extra or {})

    def _compile_args_for(self, extra: dict | None) -> dict:
        args = dict(self.compile_args)
        if extra:
            base = args.get("pass_configs")
            base = dict(getattr(base, "given", None) or base or {})
            args["pass_configs"] = {**base, **extra}
        return args

    def _factory_for(self, extra: dict | None):
        """The jit factory compiling with the config's own pass_configs (a copy of it; cached)."""
        if not extra:
            return self.factory
        from ..compiler.cache import cache_key as _key
        from ..jit import JITFactory
        key = _key(sorted((str(k), v) for k, v in extra.items()))
        cache = self.__dict__.setdefault("_factories", {})
        if key not in cache:
            f = self.factory
            kw = {k: getattr(f, k) for k in ("execution_backend", "compile_flags", "debug_root_path")
                  if getattr(f, k, None) is not None}
            cache[key] = JITFactory(f.fn, out_idx=f.compile_kwargs.get("out_idx"), target=f.compile_kwargs.get("target"),
                                    pass_configs=self._compile_args_for(extra)["pass_configs"], **kw)
        return cache[key]

    def compile(self, config: dict) -> tuple[Any, Any]:
        """(kernel, prim_func or None) for ``config``."""
        kw, extra = self._split(config)
        kw = {**self.kwargs, **kw}
        if self.through_factory:
            # `.compile`: the kernel without running it (an eager-style jit runs when called)
            factory = self._factory_for(extra)
            kernel = getattr(factory, "compile", factory)(*self.args, **kw)
            func = getattr(kernel, "prim_func", None) or getattr(kernel, "func", None)  # JITKernel.func
            return kernel, func
        import tilecraft

        func = self.fn(*self.args, **kw)
        return tilecraft.compile(func, **_accepted(tilecraft.compile, self._compile_args_for(extra))), func

    def prepare(self) -> None:
        """Resolve the target here, in the parent: a forked child must not query the GPU (CUDA
        cannot be re-initialised in a child of a process that uses it)."""
        try:
            from ..target import Target

            self._target = Target.resolve(self.compile_args.get("target"))
        except Exception:  # noqa: BLE001 - workers then compile the ordinary way
            self._target = None

    def precompile(self, config: dict) -> None:
        """Compile ``config`` for its artifacts in the disk cache (used in worker processes).

        Prefers a runtime hook (``factory.precompile``), then the build step alone (which writes
        the cache entry without loading the binary onto a device), then a full compile.
        """
        kw, extra = self._split(config)
        kw = {**self.kwargs, **kw}
        factory = self._factory_for(extra) if self.through_factory else self.factory
        if self.through_factory and hasattr(factory, "precompile"):
            factory.precompile(*self.args, **kw)
            return
        target = getattr(self, "_target", None)
        if target is not None:
            from ..compiler.build import build
            from ..ir.func import PrimFunc

            get_tir = getattr(factory, "get_tir", None) if self.through_factory else None
            func = get_tir(*self.args, **kw) if get_tir is not None else self.fn(*self.args, **kw)
            if isinstance(func, PrimFunc):
                build(func, target, self._compile_args_for(extra).get("pass_configs"))
                return
        if self.through_factory:
            getattr(factory, "compile", factory)(*self.args, **kw)
            return
        import tilecraft

        tilecraft.compile(self.fn(*self.args, **kw), **_accepted(tilecraft.compile, self._compile_args_for(extra)))

    def key_parts(self) -> tuple:
        """Everything about the program that a stored tuning result depends on."""
        return (fingerprint_function(self.fn), self.args, self.kwargs, self.compile_args,
                hardware_fingerprint(self.compile_args.get("target")))

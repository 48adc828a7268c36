"""``@autotune``: stacked above ``@tilelang.jit``, calling the factory tunes it.

    @tilelang.autotune(configs=[{"block_M": 64}, {"block_M": 128}], warmup=10, rep=20)
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128): ...

    kernel = matmul(1024, 1024, 1024)   # tunes block_M (once per argument set), returns the best kernel

Arguments given at the call are fixed; each config supplies the remaining keyword arguments. A
call that gives every tuned argument explicitly just compiles that kernel, without tuning. Results
are kept in memory per argument set (and on disk by the tuner), and ``.results`` /
``.last_result`` expose the ``AutotuneResult`` objects for ``table()`` and ``plot()``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

from ..compiler.cache import cache_key
from ..profiler import TensorSupplyType
from .inputs import current_autotune_inputs, set_autotune_inputs
from .result import AutotuneResult
from .tuner import AutoTuner

__all__ = ["autotune", "AutoTuneImpl"]


def _dedupe(configs: list[dict]) -> list[dict]:
    seen, out = set(), []
    for c in configs:
        try:
            marker: Any = cache_key(c)
        except TypeError:
            marker = repr(c)
        if marker not in seen:
            seen.add(marker)
            out.append(c)
    return out


class _ShapeOnly(tuple):
    """A tensor argument of an eager-style function as the tuner keeps it: its shape (all that
    binds the function's `T.const`s) -- hashable, and no data kept alive or keyed on."""

    @property
    def shape(self):
        return tuple(self)


def _shape_only(value: Any) -> Any:
    if hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, _ShapeOnly):
        return _ShapeOnly(int(s) for s in value.shape)
    return value


class AutoTuneImpl:
    """The object ``@autotune`` returns: call it like the factory to get the tuned kernel."""

    def __init__(self, factory: Callable, configs: Sequence[dict] | Callable, profile_args: dict,
                 executor: Any = None):
        self.factory = factory
        self.configs = configs
        self.profile_args = profile_args
        self.executor = executor
        self.results: dict[Any, AutotuneResult] = {}
        self.last_result: AutotuneResult | None = None
        functools.update_wrapper(self, getattr(factory, "fn", factory), updated=())

    def _memo_key(self, args: tuple, kwargs: dict) -> Any:
        inputs = current_autotune_inputs()
        sig = None if inputs is None else tuple(
            (tuple(t.shape), str(t.dtype), str(t.device), t.data_ptr()) if hasattr(t, "data_ptr") else id(t)
            for t in inputs)
        try:
            return cache_key(args, kwargs, repr(sig))
        except TypeError:
            return repr((args, sorted(kwargs.items()), sig))

    @property
    def eager(self) -> bool:
        """Whether the jit below is in the eager style (its body is the kernel: calling it runs it)."""
        return getattr(self.factory, "mode", "lazy") == "eager"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Lazy style: the tuned kernel.  Eager style: tune for these tensors' shapes (once), then run
        the best kernel on them and return its outputs."""
        if not self.eager:
            return self._tuned(args, kwargs)
        inputs = None
        if current_autotune_inputs() is None:  # profile on the call's own tensors (their sizes may be symbolic)
            try:  # the tensors in the signature's order: the kernel's inputs
                given = inspect.signature(self.factory.fn).bind_partial(*args, **kwargs).arguments.values()
            except TypeError:
                given = ()
            inputs = tuple(v for v in given if hasattr(v, "shape") and hasattr(v, "dtype") and getattr(v, "ndim", 0) > 0)
        kernel = self._tuned(tuple(_shape_only(a) for a in args), {k: _shape_only(v) for k, v in kwargs.items()},
                             inputs or None)
        config = getattr(kernel, "config", None) or {}
        args, kwargs = self._by_name(args, kwargs, set(config))
        return self.factory(*args, **{**kwargs, **{k: v for k, v in config.items() if k not in kwargs}})

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """The tuned kernel for these arguments, not run (an eager function's `T.const`s may be given
        as keywords instead of tensors); it carries `.config` and `.latency`."""
        if self.eager:
            args, kwargs = tuple(_shape_only(a) for a in args), {k: _shape_only(v) for k, v in kwargs.items()}
        return self._tuned(args, kwargs)

    def _tuned(self, args: tuple, kwargs: dict, inputs: tuple | None = None) -> Any:
        key = self._memo_key(args, kwargs)
        if key in self.results:
            self.last_result = self.results[key]
            return self.last_result.kernel
        configs = self.configs
        if callable(configs):
            configs = AutoTuner(self.factory, configs).set_kernel_parameters(args, kwargs)._resolve_configs()
        configs = list(configs)
        tuned = {k for c in configs for k in c}
        args, kwargs = self._by_name(args, kwargs, tuned)
        fixed = {k: v for k, v in kwargs.items() if k in tuned}
        if tuned and tuned <= set(fixed):  # everything given: no search
            return getattr(self.factory, "compile", self.factory)(*args, **kwargs)
        configs = _dedupe([{**c, **fixed} for c in configs])
        rest = {k: v for k, v in kwargs.items() if k not in tuned}
        tuner = (AutoTuner.from_kernel(self.factory, configs).set_kernel_parameters(args, rest)
                 .set_profile_args(**self.profile_args).set_executor(self.executor))
        if inputs is not None:
            with set_autotune_inputs(*inputs):
                result = tuner.run()
        else:
            result = tuner.run()
        self.results[key] = self.last_result = result
        for attr, value in (("config", dict(result.config)), ("latency", result.latency),
                            ("ref_latency", result.ref_latency)):
            try:  # TileLang's tuned kernel carries its config and latency
                setattr(result.kernel, attr, value)
            except AttributeError:
                pass
        return result.kernel

    def _by_name(self, args: tuple, kwargs: dict, tuned: set) -> tuple[tuple, dict]:
        """A tuned parameter given positionally (`f(1, 2, 64)` for `block_N`) is fixed like a keyword:
        the call's arguments become keywords, so a config never gives it a second value."""
        fn = getattr(self.factory, "fn", self.factory)
        try:
            bound = inspect.signature(fn).bind_partial(*args, **kwargs)
        except (TypeError, ValueError):
            return args, kwargs
        if not tuned & set(bound.arguments) - set(kwargs) or any(
                p.kind in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY) for p in bound.signature.parameters.values()):
            return args, kwargs
        return (), dict(bound.arguments)

    def get_tune_result(self, *args: Any, **kwargs: Any) -> AutotuneResult | None:
        """The stored result for this argument set, if it was tuned in this process."""
        return self.results.get(self._memo_key(args, kwargs))


def autotune(configs: Sequence[dict] | Callable | None = None, warmup: float = 25, rep: float = 100,
             timeout: float | None = None, supply_type: TensorSupplyType = TensorSupplyType.Auto,
             ref_prog: Callable | None = None, rtol: float | None = 1e-2, atol: float | None = 1e-2,
             max_mismatched_ratio: float = 0.01, skip_check: bool = False,
             manual_check_prog: Callable | None = None, cache_input_tensors: bool = True,
             supply_prog: Callable | None = None, flops: float | Callable | None = None,
             bytes: float | Callable | None = None,  # noqa: A002
             early_stop: bool = False, early_stop_factor: float | None = None,
             executor: Any = None) -> Callable[[Callable], AutoTuneImpl]:
    """Decorator: tune the ``@jit`` factory below it over ``configs`` whenever it is called.
    ``early_stop=True``: configs slower than ``early_stop_factor`` x the best so far in a short
    probe are not timed in full (``AutoTuner.run``).  ``executor``: ``"local"``, ``"ray"`` or an
    executor object (default ``TILECRAFT_AUTOTUNE_EXECUTOR``)."""
    if configs is None:
        raise TypeError("autotune: configs= is required (a list of dicts, or a function returning one)")
    if callable(configs) is False and not isinstance(configs, (list, tuple)):
        raise TypeError(f"autotune: configs must be a list of dicts or a callable, got {type(configs).__name__}")
    profile_args = dict(supply_type=supply_type, ref_prog=ref_prog, rtol=rtol, atol=atol,
                        max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check, warmup=warmup, rep=rep,
                        timeout=timeout, manual_check_prog=manual_check_prog,
                        cache_input_tensors=cache_input_tensors, supply_prog=supply_prog, flops=flops, bytes=bytes)
    if not isinstance(early_stop, bool):
        raise TypeError(f"autotune: early_stop must be True or False, got {early_stop!r}")
    if early_stop or early_stop_factor is not None:
        from .tuner import _with_early_stop, ProfileArgs
        profile_args["early_stop_factor"] = _with_early_stop(ProfileArgs(), early_stop, early_stop_factor).early_stop_factor

    def decorate(factory: Callable) -> AutoTuneImpl:
        return AutoTuneImpl(factory, configs, profile_args, executor)

    return decorate

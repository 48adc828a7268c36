"""``Profiler``: fresh inputs, correctness checks and timing for one compiled kernel.

What it relies on from the kernel (``JITKernel`` or any object with the same surface):
``kernel.params`` (each with ``.name``, ``.shape`` of static ints, ``.dtype`` a ``torch.dtype``,
``.is_output``), ``kernel.out_idx``, ``kernel.name``, ``kernel.device_type`` ("cpu"/"cuda"), and
``kernel(*inputs)`` taking the non-output parameters and returning the output tensor, a tuple of
them, or None.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import torch

from .bench import BenchStats, measure
from .compare import as_outputs, mismatch_report
from .supply import TensorSupplyType, get_tensor_supply

__all__ = ["Profiler"]


def _sync(device_type: str) -> None:
    if device_type == "cuda":
        torch.cuda.synchronize()


def _clone(x: Any) -> Any:
    return x.clone() if isinstance(x, torch.Tensor) else x


class Profiler:
    """Benchmarks and checks ``kernel`` on inputs drawn according to ``supply_type``."""

    def __init__(self, kernel: Any, supply_type: TensorSupplyType = TensorSupplyType.Auto):
        self.kernel = kernel
        self.supply_type = TensorSupplyType(supply_type)
        from ..target import cuda_available
        self.device_type: str = getattr(kernel, "device_type", "cuda" if cuda_available() else "cpu")
        self._supply = get_tensor_supply(self.supply_type, self.device_type)

    # ------------------------------------------------------------------ parameters and inputs

    @property
    def func(self) -> Any:
        """The kernel this profiler runs (TileLang's `profiler.func(*tensors)`)."""
        return self.kernel

    @property
    def name(self) -> str:
        return getattr(self.kernel, "name", type(self.kernel).__name__)

    @property
    def params(self) -> list:
        return list(self.kernel.params)

    def _is_output(self, index: int, param: Any) -> bool:
        if hasattr(param, "is_output"):
            return bool(param.is_output)
        n = len(self.kernel.params)
        return index in {i % n for i in (getattr(self.kernel, "out_idx", None) or [])}

    @property
    def input_params(self) -> list:
        """The parameters a caller passes (the non-output ones), in order."""
        return [p for i, p in enumerate(self.params) if not self._is_output(i, p)]

    @property
    def output_params(self) -> list:
        return [p for i, p in enumerate(self.params) if self._is_output(i, p)]

    def supply(self, with_output: bool = False) -> list[torch.Tensor]:
        """Fresh tensors for the kernel's inputs (all parameters with ``with_output``)."""
        params = self.params if with_output else self.input_params
        return [self._supply(p) for p in params]

    def _get_inputs(self, with_output: bool = False) -> list[torch.Tensor]:
        """TileLang's name for ``supply``."""
        return self.supply(with_output)

    def run_once(self, func: Callable | None = None, input_tensors: Sequence | None = None) -> Any:
        """Run the kernel (or ``func``) once on fresh inputs and return what it returns."""
        ins = list(input_tensors) if input_tensors is not None else self.supply()
        out = (func or self.kernel)(*ins)
        _sync(self.device_type)
        return out

    # ------------------------------------------------------------------ timing

    def _bench_callable(self, fn: Callable | None, input_tensors: Sequence | None) -> Callable[[], Any]:
        ins = list(input_tensors) if input_tensors is not None else self.supply()
        target = self.kernel if fn is None else fn
        if fn is not None and ins:
            try:  # profiler.do_bench(lambda: ...) is common; only pass inputs to a callable taking them
                inspect.signature(fn).bind(*ins)
            except TypeError:
                try:
                    inspect.signature(fn).bind()
                    return fn
                except TypeError:
                    pass
            except ValueError:  # no signature (builtins): assume it takes the inputs
                pass
        return lambda: target(*ins)

    def bench_stats(self, fn: Callable | None = None, warmup: float = 25, rep: float = 100,
                    n_warmup: int | None = None, n_repeat: int | None = None,
                    input_tensors: Sequence | None = None, flush_l2: bool | str = True,
                    cuda_graph: bool = False) -> BenchStats:
        """Every timing sample of ``fn(*inputs)`` (default: the kernel) as ``BenchStats``."""
        call = self._bench_callable(fn, input_tensors)
        return measure(call, warmup, rep, n_warmup, n_repeat, flush_l2, cuda_graph, self.device_type)

    def do_bench(self, fn: Callable | None = None, warmup: float = 25, rep: float = 100,
                 n_warmup: int | None = None, n_repeat: int | None = None,
                 input_tensors: Sequence | None = None, return_mode: str = "mean",
                 quantiles: Sequence[float] | None = None, flush_l2: bool | str = True,
                 cuda_graph: bool = False, *, func: Callable | None = None, backend: str = "event"):
        """Milliseconds per call of the kernel (or of ``fn(*inputs)``, e.g. a torch reference).

        Inputs are synthesized once (or taken from ``input_tensors``) and reused by every call.
        ``func=`` is TileLang's spelling of ``fn``; ``backend`` is accepted for compatibility.
        """
        stats = self.bench_stats(fn if fn is not None else func, warmup, rep, n_warmup, n_repeat,
                                 input_tensors, flush_l2, cuda_graph)
        return stats.select(return_mode, quantiles)

    # ------------------------------------------------------------------ correctness

    def _output_names(self, count: int, inplace: bool) -> list[str]:
        params = self.params if inplace else self.output_params
        names = [getattr(p, "name", f"#{i}") for i, p in enumerate(params)]
        if inplace:
            names = names[len(names) - count:] if count <= len(names) else names
        return names + [f"output {i}" for i in range(len(names), count)]

    def compare(self, ref_prog: Callable, input_tensors: Sequence | None = None) -> tuple[list, list, list[str]]:
        """Run kernel and reference on the same inputs; return (actual, expected, names).

        The reference gets clones of the inputs, so neither side sees the other's writes. A kernel
        without outputs (it writes into its arguments) is compared on its arguments: against the
        reference's arguments after the reference ran, or, when the reference returns k tensors,
        its last k arguments against them (TileLang's convention that outputs come last).
        """
        ins = list(input_tensors) if input_tensors is not None else self.supply()
        ref_ins = [_clone(x) for x in ins]
        actual = as_outputs(self.kernel(*ins))
        _sync(self.device_type)
        expected = as_outputs(ref_prog(*ref_ins))
        _sync(self.device_type)
        if not actual and not getattr(self.kernel, "out_idx", None):
            args = [x for x in ins if isinstance(x, torch.Tensor)]
            if expected:
                actual = tuple(args[len(args) - len(expected):]) if len(expected) <= len(args) else tuple(args)
            else:
                actual, expected = tuple(args), tuple(x for x in ref_ins if isinstance(x, torch.Tensor))
            return list(actual), list(expected), self._output_names(len(actual), inplace=True)
        return list(actual), list(expected), self._output_names(len(actual), inplace=False)

    def assert_allclose(self, ref_prog: Callable, rtol: float | None = 1e-2, atol: float | None = 1e-2,
                        max_mismatched_ratio: float = 0.01, input_tensors: Sequence | None = None,
                        manual_check_prog: Callable | None = None) -> None:
        """Raise ``AssertionError`` unless every output matches ``ref_prog(*inputs)``.

        ``rtol``/``atol`` of None pick per-dtype defaults (``compare.default_tolerances``).
        ``manual_check_prog(actual_outputs, expected_outputs)``, if given, replaces the built-in
        comparison and should raise on a mismatch.
        """
        actual, expected, names = self.compare(ref_prog, input_tensors)
        if manual_check_prog is not None:
            manual_check_prog(actual if len(actual) != 1 else actual[0],
                              expected if len(expected) != 1 else expected[0])
            return
        if len(actual) != len(expected):
            raise AssertionError(f"{self.name}: the kernel returned {len(actual)} output(s) but the "
                                 f"reference returned {len(expected)}")
        failures = []
        for out, ref, name in zip(actual, expected, names):
            report = mismatch_report(out, ref, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
                                     kernel_name=self.name, output_name=name)
            if report:
                failures.append(report)
        if failures:
            raise AssertionError("\n".join(failures))

    def manual_assert_close(self, ref_prog: Callable, input_tensors: Sequence | None = None,
                            manual_check_prog: Callable | None = None) -> None:
        """TileLang's spelling: compare with a user-written check."""
        if manual_check_prog is None:
            raise ValueError("manual_assert_close needs manual_check_prog")
        self.assert_allclose(ref_prog, input_tensors=input_tensors, manual_check_prog=manual_check_prog)

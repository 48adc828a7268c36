"""Comparing a kernel's outputs with a reference, and saying precisely how they differ.

An element matches when ``|actual - expected| <= atol + rtol * |expected|`` (``torch.isclose``;
NaN matches NaN, inf matches the same inf). A tensor passes when at most
``max_mismatched_ratio`` of its elements mismatch: reduced-precision kernels legitimately
disagree with a float32 reference on a few elements that sit on a rounding boundary.

A failure message names the kernel, the output, its shape and dtype, how many elements differ,
the largest absolute and relative errors and where, the first few mismatches with both values,
and the NaN/inf counts on each side -- enough to tell a tolerance problem (many tiny errors) from
an indexing bug (a block of garbage) or an uninitialised tile (NaNs) without a debugger.
"""

from __future__ import annotations

from typing import Any

import torch

from .supply import is_float8

__all__ = ["default_tolerances", "mismatch_report", "as_outputs"]

_FIRST_MISMATCHES = 8


def default_tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) suited to a kernel whose result is stored in ``dtype``."""
    if dtype == torch.float64:
        return 1e-7, 1e-7
    if dtype == torch.float32:
        return 1e-3, 1e-3  # different summation order; tf32 tensor-core math on GPUs
    if dtype == torch.float16:
        return 1e-2, 1e-2
    if dtype == torch.bfloat16:
        return 2e-2, 2e-2
    if is_float8(dtype):
        return 1.25e-1, 1.25e-1
    if dtype.is_floating_point or dtype.is_complex:
        return 1e-2, 1e-2
    return 0.0, 0.0  # integers and bool: exact


def as_outputs(value: Any) -> tuple:
    """A kernel's or reference's return value as a tuple of results (None -> ())."""
    if value is None:
        return ()
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,)


def _compute_dtype(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    wide = {torch.float64, torch.int64, torch.int32, torch.complex128}
    if a.is_complex or b.is_complex:
        return torch.complex128
    return torch.float64 if (a in wide or b in wide) else torch.float32


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    idx = []
    for dim in reversed(shape):
        idx.append(flat % dim if dim else 0)
        flat = flat // dim if dim else 0
    return tuple(reversed(idx))


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def mismatch_report(actual: Any, expected: Any, *, rtol: float | None = None, atol: float | None = None,
                    max_mismatched_ratio: float = 0.01, kernel_name: str = "kernel",
                    output_name: str = "output") -> str | None:
    """None when ``actual`` matches ``expected`` within tolerance, else a readable summary.

    ``rtol``/``atol`` left as None take ``default_tolerances`` of the actual tensor's dtype.
    """
    if not isinstance(actual, torch.Tensor):
        actual = torch.as_tensor(actual)
    if not isinstance(expected, torch.Tensor):
        expected = torch.as_tensor(expected)
    expected = expected.detach().to(actual.device)
    actual = actual.detach()
    head = f"{kernel_name}: output {output_name!r} (shape {tuple(actual.shape)}, {str(actual.dtype).replace('torch.', '')})"
    if tuple(actual.shape) != tuple(expected.shape):
        return f"{head}: the reference has shape {tuple(expected.shape)}"
    d_rtol, d_atol = default_tolerances(actual.dtype)
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    numel = actual.numel()
    if numel == 0:
        return None

    ctype = _compute_dtype(actual.dtype, expected.dtype)
    a = actual.to(ctype)
    e = expected.to(ctype)
    close = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    mism = ~close
    n_mism = int(mism.sum())
    ratio = n_mism / numel
    if n_mism == 0 or ratio <= max_mismatched_ratio:
        return None

    diff = (a - e).abs()
    # NaNs are counted on their own line; the largest errors are those among the numbers.
    diff = torch.where(close, torch.zeros_like(diff), diff.nan_to_num(nan=0.0, posinf=float("inf")))
    rel = diff / e.abs().nan_to_num(nan=0.0).clamp_min(torch.finfo(torch.float32).tiny)
    rel = torch.where(close, torch.zeros_like(rel), rel)
    flat_diff, flat_rel = diff.reshape(-1), rel.reshape(-1)
    i_abs, i_rel = int(flat_diff.argmax()), int(flat_rel.argmax())
    shape = tuple(actual.shape)

    def count(t: torch.Tensor, fn) -> int:
        return int(fn(t).sum()) if t.is_floating_point() or t.is_complex() else 0

    lines = [
        f"{head}: {n_mism} of {numel} elements mismatch ({ratio:.2%}, allowed "
        f"{max_mismatched_ratio:.2%}; rtol={rtol:g}, atol={atol:g})",
        f"  max abs error {_fmt(float(flat_diff[i_abs]))} at {_index(i_abs, shape)}; "
        f"max rel error {_fmt(float(flat_rel[i_rel]))} at {_index(i_rel, shape)}",
        f"  NaN: {count(a, torch.isnan)} in actual, {count(e, torch.isnan)} in reference; "
        f"inf: {count(a, torch.isinf)} in actual, {count(e, torch.isinf)} in reference",
        f"  first mismatches (index: actual vs expected):",
    ]
    flat_a, flat_e = a.reshape(-1), e.reshape(-1)
    for flat in mism.reshape(-1).nonzero()[:_FIRST_MISMATCHES, 0].tolist():
        lines.append(f"    {_index(flat, shape)}: {_fmt(flat_a[flat].item())} vs {_fmt(flat_e[flat].item())}")
    return "\n".join(lines)

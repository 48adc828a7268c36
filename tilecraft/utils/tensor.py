"""Tensor helpers with TileLang's meaning (`tilelang.utils.tensor`).

- `map_torch_type(dtype)`: a tilecraft / TileLang dtype spelling ("float16", T.bfloat16,
  "float8_e4m3") -> the torch dtype.
- `torch_assert_close(a, b, rtol, atol, max_mismatched_ratio, ...)`: like `torch.testing.assert_close`,
  but passes while at most `max_mismatched_ratio` of the elements differ (reduced-precision kernels
  legitimately round a few elements differently), and reports the mismatches readably.
- `get_tensor_supply` / `TensorSupplyType`: the profiler's input generators.
"""
from __future__ import annotations

from ..profiler.supply import TensorSupplyType, get_tensor_supply

__all__ = ["map_torch_type", "torch_assert_close", "get_tensor_supply", "TensorSupplyType", "is_float8_dtype",
           "adapt_torch2tvm"]


def map_torch_type(dtype):
    """The torch dtype for `dtype` (a string, a `T.*` dtype, or a torch dtype itself)."""
    import torch
    if isinstance(dtype, torch.dtype):
        return dtype
    from ..ir.dtype import dtype as normalize, to_torch
    d = normalize(dtype)
    t = to_torch(d)
    if t is None:
        raise ValueError(f"map_torch_type: this torch has no dtype for {d.name}")
    return t


def is_float8_dtype(dtype) -> bool:
    import torch
    return isinstance(dtype, torch.dtype) and "float8" in str(dtype)


def adapt_torch2tvm(arg):
    """TileLang converts torch tensors for TVM here; tilecraft kernels take torch tensors directly."""
    return arg


def torch_assert_close(tensor_a, tensor_b, rtol=1e-2, atol=1e-3, max_mismatched_ratio=0.001, verbose=False,
                       equal_nan=True, check_device=True, check_dtype=True, check_layout=True,
                       check_stride=False, base_name="LHS", compare_name="RHS"):
    """Raise `AssertionError` when more than `max_mismatched_ratio` of the elements of `tensor_a`
    and `tensor_b` differ by more than `atol + rtol * |tensor_b|` (NaN == NaN with `equal_nan`)."""
    import torch
    if not isinstance(tensor_a, torch.Tensor) or not isinstance(tensor_b, torch.Tensor):
        raise AssertionError(f"torch_assert_close expects two tensors, got {type(tensor_a).__name__} and "
                             f"{type(tensor_b).__name__}")
    if check_device and tensor_a.device != tensor_b.device:
        raise AssertionError(f"{base_name} is on {tensor_a.device}, {compare_name} on {tensor_b.device}")
    if check_dtype and tensor_a.dtype != tensor_b.dtype:
        raise AssertionError(f"{base_name} is {tensor_a.dtype}, {compare_name} is {tensor_b.dtype}")
    if check_layout and tensor_a.layout != tensor_b.layout:
        raise AssertionError(f"{base_name} has layout {tensor_a.layout}, {compare_name} {tensor_b.layout}")
    if check_stride and tensor_a.stride() != tensor_b.stride():
        raise AssertionError(f"{base_name} has strides {tensor_a.stride()}, {compare_name} {tensor_b.stride()}")
    if tensor_a.shape != tensor_b.shape:
        raise AssertionError(f"{base_name} has shape {tuple(tensor_a.shape)}, {compare_name} {tuple(tensor_b.shape)}")
    from ..profiler.compare import mismatch_report
    a, b = tensor_a.detach(), tensor_b.detach().to(tensor_a.device)
    if not equal_nan and (a.is_floating_point() and (a.isnan().any() or b.isnan().any())):
        raise AssertionError(f"NaN in {base_name} or {compare_name} (equal_nan=False)")
    report = mismatch_report(a, b, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
                             kernel_name=f"{base_name} vs {compare_name}", output_name=base_name)
    if report is not None:
        raise AssertionError(report)
    if verbose:
        print(f"{base_name} and {compare_name} are close (rtol={rtol}, atol={atol})")

"""Synthetic kernel inputs: ``TensorSupplyType`` and ``get_tensor_supply``.

The meanings follow TileLang, so tolerances tuned there carry over:

- ``Integer``: small random integers (-2..2; 0..2 for unsigned types; 0/1 for bool) stored in the
  parameter's dtype. Products and sums of them are exact in fp16/fp32, which makes bit-exact
  checks of GEMM-like kernels possible.
- ``Uniform``: U(-1, 1) for floating types (TileLang's choice; it keeps sums centred on 0).
- ``Normal`` / ``Randn``: standard normal N(0, 1).
- ``Zero`` / ``One``: constants (useful for debugging, useless for correctness checks).
- ``Auto``: by dtype: floating types Normal, integer types Integer, bool random 0/1.

Integer dtypes asked for Uniform/Normal/Randn get Integer values (a normal draw cannot be stored
in an int), and float8 tensors are drawn in float32 and then cast.
"""

from __future__ import annotations

import enum
from typing import Any, Callable

import torch

__all__ = ["TensorSupplyType", "get_tensor_supply", "is_float8", "is_unsigned"]


class TensorSupplyType(enum.Enum):
    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


_UNSIGNED = {torch.uint8} | {getattr(torch, n) for n in ("uint16", "uint32", "uint64") if hasattr(torch, n)}
_FLOAT8 = {getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                                       "float8_e8m0fnu") if hasattr(torch, n)}


def is_unsigned(dtype: torch.dtype) -> bool:
    return dtype in _UNSIGNED


def is_float8(dtype: torch.dtype) -> bool:
    return dtype in _FLOAT8


def _static_shape(param: Any) -> list[int]:
    shape = getattr(param, "shape", None)
    if shape is None:
        raise ValueError(f"parameter {getattr(param, 'name', param)!r} has no shape to synthesize an input from")
    dims = []
    for d in shape:
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(
                f"parameter {getattr(param, 'name', '?')!r} has a symbolic dimension {d!r}; "
                "the profiler cannot invent its size: pass input_tensors (or set_autotune_inputs)")
        dims.append(d)
    return dims


def _integers(shape: list[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device=device, dtype=torch.bool)
    if is_unsigned(dtype):
        return torch.randint(0, 3, shape, device=device, dtype=torch.int64).to(dtype)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randint(-2, 3, shape, device=device, dtype=torch.int64).to(dtype)
    return torch.randint(-2, 3, shape, device=device, dtype=dtype)


def _floats(kind: TensorSupplyType, shape: list[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    work = torch.float32 if is_float8(dtype) else dtype
    if kind is TensorSupplyType.Uniform:
        t = torch.empty(shape, device=device, dtype=work).uniform_(-1.0, 1.0)
    else:
        t = torch.randn(shape, device=device, dtype=work)
    return t.to(dtype)


def default_device() -> torch.device:
    from ..target import cuda_available
    return torch.device("cuda" if cuda_available() else "cpu")


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Auto,
                      device: str | torch.device | None = None) -> Callable[[Any], torch.Tensor]:
    """A function ``param -> torch.Tensor`` producing a fresh tensor for a kernel parameter.

    ``param`` needs ``.shape`` (static ints) and ``.dtype`` (a ``torch.dtype``); ``device``
    defaults to the current CUDA device when there is one, else the CPU.
    """
    supply_type = TensorSupplyType(supply_type) if not isinstance(supply_type, TensorSupplyType) else supply_type
    dev = torch.device(device) if device is not None else default_device()

    def supply(param: Any) -> torch.Tensor:
        shape = _static_shape(param)
        dtype = param.dtype
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"parameter {getattr(param, 'name', '?')!r}: dtype {dtype!r} is not a torch.dtype")
        kind = supply_type
        if kind is TensorSupplyType.Zero:
            return torch.zeros(shape, device=dev, dtype=dtype)
        if kind is TensorSupplyType.One:
            return torch.ones(shape, device=dev, dtype=dtype)
        floating = dtype.is_floating_point
        if kind is TensorSupplyType.Auto:
            kind = TensorSupplyType.Normal if floating else TensorSupplyType.Integer
        if kind is TensorSupplyType.Integer or not floating:
            return _integers(shape, dtype, dev)
        return _floats(kind, shape, dtype, dev)

    return supply

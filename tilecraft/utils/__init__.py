"""Helpers with TileLang's meaning (`tilelang.utils`): tensor helpers (`tensor`), fp8 type helpers,
and the target query `determine_target`."""
from __future__ import annotations

from . import tensor
from .tensor import TensorSupplyType, get_tensor_supply, map_torch_type, torch_assert_close

__all__ = ["tensor", "map_torch_type", "torch_assert_close", "get_tensor_supply", "TensorSupplyType",
           "determine_fp8_type", "determine_torch_fp8_type", "is_hip", "is_cuda", "determine_target"]


def is_hip() -> bool:
    import torch
    return getattr(torch.version, "hip", None) is not None


def is_cuda() -> bool:
    import torch
    return torch.cuda.is_available() and not is_hip()


def determine_fp8_type(fp8_format: str = "e4m3") -> str:
    """The dtype name of the 8-bit float format `fp8_format` ("e4m3" or "e5m2") on this platform:
    NVIDIA's OCP formats (`float8_e4m3fn`, `float8_e5m2`); AMD's `...fnuz` variants under ROCm."""
    if fp8_format not in ("e4m3", "e5m2"):
        raise ValueError(f"determine_fp8_type: fp8_format must be 'e4m3' or 'e5m2', got {fp8_format!r}")
    if is_hip():
        return "float8_e4m3fnuz" if fp8_format == "e4m3" else "float8_e5m2fnuz"
    return "float8_e4m3fn" if fp8_format == "e4m3" else "float8_e5m2"


def determine_torch_fp8_type(fp8_format: str = "e4m3"):
    """The torch dtype of `determine_fp8_type(fp8_format)`."""
    import torch
    return getattr(torch, determine_fp8_type(fp8_format))


def determine_target(target="auto", return_object=False):
    """The target tilecraft compiles for when asked for `target` ("auto": the GPU, else the CPU)."""
    from ..target import Target
    t = Target.resolve(target)
    return t if return_object else str(t)

"""`tilelang.carver.arch.driver`: properties of the current CUDA device, read through torch."""
from __future__ import annotations


def _props(device_id: int = 0):
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: tilelang.carver.arch.driver needs a GPU")
    return torch.cuda.get_device_properties(device_id)


def get_num_sms(device_id: int = 0) -> int:
    return _props(device_id).multi_processor_count


def get_device_name(device_id: int = 0) -> str:
    return _props(device_id).name


def get_max_dynamic_shared_size_bytes(device_id: int = 0, format: str = "bytes") -> int:  # noqa: A002
    p = _props(device_id)
    n = getattr(p, "shared_memory_per_block_optin", None) or p.shared_memory_per_block
    return n // 1024 if format == "kb" else n


def get_registers_per_block(device_id: int = 0) -> int:
    return getattr(_props(device_id), "regs_per_block", 65536)


def get_l2_cache_size(device_id: int = 0) -> int:
    return getattr(_props(device_id), "L2_cache_size", 0)

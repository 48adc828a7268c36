"""`tilelang.contrib.nvcc`: the compute capability of the current GPU, as TileLang reports it."""
from __future__ import annotations


def get_target_compute_version(target=None) -> str:
    """"major.minor" of the current CUDA device (e.g. "9.0"); ValueError without one."""
    import torch
    if not torch.cuda.is_available():
        raise ValueError("no CUDA device: cannot determine the compute version")
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    try:
        major, minor = str(compute_version).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        raise ValueError(f"compute version {compute_version!r} is not of the form major.minor") from None


def have_tensorcore(compute_version=None, target=None) -> bool:
    major, _ = parse_compute_version(compute_version or get_target_compute_version())
    return major >= 7


def get_nvcc_compiler() -> str:
    import shutil
    path = shutil.which("nvcc")
    if path is None:
        raise FileNotFoundError("nvcc is not on PATH")
    return path

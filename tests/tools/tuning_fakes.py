"""Stand-ins for compiled kernels that implement the JITKernel surface the tools rely on.

``kernel.params`` (name, shape, dtype, is_output), ``kernel.out_idx``, ``kernel.name``,
``kernel.device_type`` and ``kernel(*inputs)`` returning the outputs. The work is done by torch,
so the profiler and autotuner can be tested without a compiler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class ParamInfo:
    name: str
    shape: tuple
    dtype: torch.dtype
    is_output: bool = False


class FakeKernel:
    def __init__(self, fn: Callable, params: list[ParamInfo], name: str = "fake_kernel",
                 device_type: str = "cpu", prim_func=None):
        self.fn = fn
        self.params = params
        self.out_idx = [i for i, p in enumerate(params) if p.is_output]
        self.name = name
        self.device_type = device_type
        self.prim_func = prim_func
        self.calls = 0

    def __call__(self, *inputs):
        n_in = sum(not p.is_output for p in self.params)
        if len(inputs) != n_in:
            raise TypeError(f"{self.name}: expected {n_in} inputs, got {len(inputs)}")
        self.calls += 1
        return self.fn(*inputs)


def matmul_params(m: int, n: int, k: int, dtype=torch.float32) -> list[ParamInfo]:
    return [ParamInfo("A", (m, k), dtype), ParamInfo("B", (k, n), dtype), ParamInfo("C", (m, n), dtype, True)]


def chunked_matmul(chunk: int) -> Callable:
    """C = A @ B computed in row chunks of ``chunk``: small chunks are slower (more Python overhead)."""

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        for i in range(0, a.shape[0], chunk):
            out[i:i + chunk] = a[i:i + chunk] @ b
        return out

    return run

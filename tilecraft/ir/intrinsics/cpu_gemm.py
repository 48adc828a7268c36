"""The CPU target's tile GEMM: `tc::gemm_f32acc` (device/include/tilecraft_cpu_gemm.h).

`C += op(A) @ op(B)` over M x N x K with float32 accumulation, each operand given by the address
of its first element and its (row, column) strides in elements, so T.gemm's transposes and
sub-tile regions need no copies.  Its semantics are the scalar triple loop's (the header says
exactly which roundings happen); it only runs faster.  transform/lower_tile_ops_cpu.py decides
when a T.gemm takes it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import PTR, READ, READ_WRITE, Intrinsic, Operand, require


@dataclass(frozen=True)
class CpuGemm(Intrinsic):
    entry = "tc::gemm_f32acc"
    family = "cpu gemm"
    operands = (Operand("A", PTR, READ), Operand("B", PTR, READ), Operand("C", PTR, READ_WRITE))
    m: int
    n: int
    k: int
    a_strides: tuple   # (element (i, k) step along i, along k)
    b_strides: tuple   # (along k, along j)
    c_strides: tuple   # (along i, along j)
    # A and B are global tensors the program never writes (a whole k-loop's operands:
    # transform/fuse_gemm_k_loops_cpu.py): the bf16 gemm may keep them packed for the rest of the launch
    # (tilecraft_cpu_gemm_bf16.h, gemm_pack_cache); the entry passes its launch number, `tc_launch`
    launch_cache: bool = False

    def check(self):
        require(min(self.m, self.n, self.k) >= 1, self, "M, N and K are positive")
        require(all(len(s) == 2 for s in (self.a_strides, self.b_strides, self.c_strides)), self,
                "each operand has a (row, column) stride pair")

"""`==` / `!=` in Python helpers compile for CUDA (sm_80 and sm_90a) as comparisons in the kernel
(the CPU target runs the same programs against torch: tests/cpu/test_helper_operators.py).  Before,
Python answered `s == 1` by identity (False) and the branch vanished from the generated code."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_helper_operators import block_causal_mask, comparisons  # noqa: E402

ARCHS = ["sm_80", "sm_90a"]


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_block_causal_mask_compiles_with_its_equalities(arch):
    src = tilelang.compile(block_causal_mask.fn(32, 8), out_idx=[-1],
                           target={"kind": "cuda", "arch": arch}).get_kernel_source()
    assert "(is_noisy_diag == 1) ?" in src          # T.if_then_else(is_noisy_diag == 1, ...)
    assert "((bx % 2) == 1)" in src
    allowed = next(line for line in src.splitlines() if "allowed =" in line)
    assert allowed.count(" == ") == 2 and " > " in allowed and " >= " in allowed   # q_blk == k_blk, >, >=


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("op", ["==", "!="])
def test_equality_helpers_compile_to_comparisons(arch, op):
    src = tilelang.compile(comparisons.fn(op), out_idx=[-1], target={"kind": "cuda", "arch": arch}).get_kernel_source()
    # one comparison per row whose operands are not both constants (row 10 folds)
    assert sum(line.count(f" {op} ") for line in src.splitlines()) >= 10

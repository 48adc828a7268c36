"""tc::gemm_rs_sm90 (wgmma with A from registers) without a GPU: every driver kernel of
tests/cuda/gemm_sm90_src.py::rs_cases compiles for sm_90a into exactly the expected HGMMA
instructions (A from registers), without spills, and the generated wrapper header is current.
(On a Hopper GPU: tests/gpu/test_gemm_rs_sm90_gpu.py.)"""
from __future__ import annotations

import collections
import functools
import os
import sys

import pytest

from tilecraft.compiler import compile_cuda_nvrtc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_sm90_src import rs_cases, rs_module_source, rs_name  # noqa: E402

CASES = rs_cases()
needs_sass = pytest.mark.sass   # cuobjdump and nvdisasm (tests/conftest.py)


@functools.lru_cache(maxsize=None)
def _binary():
    return compile_cuda_nvrtc(rs_module_source(CASES), "sm_90a")


@needs_sass
def test_gemm_rs_sm90_sass_has_expected_hgmma():
    from tilecraft.compiler.sass import disassemble
    sass = disassemble(_binary().cubin)
    per_kernel = {}
    current = None
    for line in sass.splitlines():
        if "Function :" in line:
            current = line.split("Function :")[1].strip()
            per_kernel[current] = collections.Counter()
        elif current and "HGMMA." in line:
            op = line.split("*/", 1)[1].split()[0] if "*/" in line else ""
            per_kernel[current][op.split(".F32")[0] if op else op] += 1
    for c in CASES:
        got = per_kernel[rs_name(c)]
        want = collections.Counter()
        for np_ in c.n_pieces:
            want[f"HGMMA.64x{np_}x16"] += (c.K // 16) * c.MI
        assert got == want, (rs_name(c), dict(got), dict(want))


@needs_sass
def test_gemm_rs_sm90_kernels_do_not_spill():
    from tilecraft.compiler.sass import resource_usage
    for name, res in resource_usage(_binary().cubin).items():
        assert res["local_bytes"] == 0, (name, res)


def test_gemm_rs_sm90_refuses_non_sm90a():
    from tilecraft.compiler import CudaCompileError
    with pytest.raises(CudaCompileError, match="gemm_rs_sm90 needs sm_90a"):
        compile_cuda_nvrtc(rs_module_source(CASES[:1]), "sm_90")

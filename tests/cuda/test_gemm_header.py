"""Compile-only tests of tilecraft/gemm_sm80.h (no GPU): tc::gemm_ss in all four transpose
combinations, f16 and bf16, swizzled and plain, several (M, N, K, WM, WN), and tc::gemm_rs, compiled
with NVRTC for sm_80 and sm_90a; the SASS must hold exactly the expected HMMA and LDSM
instructions and no local memory.  Plus a pure-Python check that the documented swizzle is a
per-row permutation and makes every ldmatrix phase bank-conflict-free."""
from __future__ import annotations

import functools
import os
import re
import sys
from collections import Counter

import pytest

from tilecraft.compiler import CudaCompileError, compile_cuda_nvrtc, disassemble, find_cuda_tool
from tilecraft.compiler import resource_usage, sass_opcodes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_header_src import need_nvrtc  # noqa: E402
from gemm_header_src import (GemmCase, all_cases, module_source,  # noqa: E402
                             swizzle_offset)

ARCHS = ["sm_80", "sm_90a"]


def _need_nvrtc():
    need_nvrtc("sm_80")


@functools.lru_cache(maxsize=None)
def _compile_all(arch: str):
    _need_nvrtc()
    return compile_cuda_nvrtc(module_source(all_cases()), arch)


@functools.lru_cache(maxsize=None)
def _sass(arch: str) -> dict[str, list[str]]:
    binary = _compile_all(arch)
    try:
        sass = disassemble(binary.cubin)
    except RuntimeError as e:
        pytest.skip(f"cannot disassemble: {e}")
    parts = re.split(r"Function\s*:\s*(\w+)", sass)
    return {fn: sass_opcodes(body) for fn, body in zip(parts[1::2], parts[2::2])}


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_header_compiles_cleanly(arch):
    binary = _compile_all(arch)
    assert binary.cubin[:4] == b"\x7fELF"
    assert "warning" not in binary.log.lower(), binary.log


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_sass_has_expected_hmma_and_ldsm(arch):
    by_kernel = _sass(arch)
    for c in all_cases():
        ops = by_kernel[c.name]
        MI, NI, KS = c.M // c.WM // 16, c.N // c.WN // 8, c.K // 16
        hmma = "HMMA.16816.F32.BF16" if c.dtype == "bf16" else "HMMA.16816.F32"
        n_hmma = sum(op == hmma or op.startswith(hmma + ".") and not op.startswith(hmma + ".BF16")
                     for op in ops)
        assert n_hmma == MI * NI * KS, (c.name, sorted(set(ops)))
        ldsm = Counter(op for op in ops if op.startswith("LDSM"))
        # .trans (MT88) exactly where needed: A stored [K][M] and B stored [K][N]
        expect = Counter()
        b_op = "LDSM.16.M88" if c.trans_b else "LDSM.16.MT88"
        expect[b_op + ".4"] += KS * (NI // 2)
        expect[b_op + ".2"] += KS * (NI % 2)
        if not c.rs:
            expect["LDSM.16.MT88.4" if c.trans_a else "LDSM.16.M88.4"] += KS * MI
        assert ldsm == +expect, (c.name, ldsm, expect)


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_kernels_do_not_spill(arch):
    if find_cuda_tool("cuobjdump") is None:
        pytest.skip("cuobjdump not installed")
    usage = resource_usage(_compile_all(arch).cubin)
    for c in all_cases():
        assert usage[c.name]["local_bytes"] == 0, (c.name, usage[c.name])


@pytest.mark.parametrize("bad, message", [
    ("tc::gemm_ss<48, 64, 32, 2, 1, false, false, 0, 0, tc::half_t>", "M must be a multiple of 16\\*WM"),
    ("tc::gemm_ss<64, 40, 32, 1, 2, false, false, 0, 0, tc::half_t>", "N must be a multiple of 8\\*WN"),
    ("tc::gemm_ss<64, 64, 24, 1, 1, false, false, 0, 0, tc::half_t>", "K must be a multiple of 16"),
    ("tc::gemm_ss<64, 64, 32, 1, 1, false, false, 0, 0, float>", "T must be tc::half_t or tc::bfloat16_t"),
    ("tc::gemm_rs<64, 64, 32, 2, 2, false, 0, tc::half_t>", "requires WN == 1"),
])
def test_static_assert_messages(bad, message):
    _need_nvrtc()
    a = "tc::half_t" if "float>" not in bad else "float"
    src = ("#include <tilecraft/tilecraft.h>\n"
           f'extern "C" __global__ void k({a}* g, float* out) {{\n'
           f"  __shared__ __align__(16) {a} s[64 * 64];\n"
           "  float acc[64] = {};\n"
           + (f"  {a} r[64];\n  {bad}(r, s, acc);\n" if "gemm_rs" in bad else f"  {bad}(s, s, acc);\n")
           + "  out[threadIdx.x] = acc[0];\n}\n")
    with pytest.raises(CudaCompileError, match=message):
        compile_cuda_nvrtc(src, "sm_80")


# ---- swizzle model ------------------------------------------------------------------------------

@pytest.mark.parametrize("elem_bytes", [2, 4])
def test_swizzle_is_a_row_permutation_and_ldmatrix_conflict_free(elem_bytes):
    epc = 16 // elem_bytes
    for chunks in range(1, 41):
        L = chunks * epc
        for row in range(64):
            offs = sorted(swizzle_offset(L, elem_bytes, row, c) for c in range(L))
            assert offs == list(range(row * L, (row + 1) * L)), (L, row)
        # one ldmatrix phase: 8 rows (starting at a multiple of 8), same logical chunk, 16 B each
        for r0 in range(0, 64, 8):
            for ch in range(chunks):
                groups = {swizzle_offset(L, elem_bytes, r0 + i, ch * epc) * elem_bytes // 16 % 8
                          for i in range(8)}
                assert len(groups) == 8, (L, elem_bytes, r0, ch)


def test_chunk_count_rule_needs_divisibility_not_size():
    """The rule 'C >= 8: XOR with row & 7' (instead of C % 8 == 0) leaves the row for C = 12."""
    L, C = 96, 12  # 96 halves = 12 chunks
    leaves = [(r, ch) for r in range(8) for ch in range(C)
              if ((ch & ~7) | ((ch & 7) ^ (r & 7))) >= C]
    assert leaves  # e.g. row 4, chunk 8 -> 12
    assert all(swizzle_offset(L, 2, r, ch * 8) < (r + 1) * L for r, ch in leaves)

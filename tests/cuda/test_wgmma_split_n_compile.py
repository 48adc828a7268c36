"""Compile-only (no GPU): a gemm tile with fewer rows than 64 per warpgroup goes on wgmma with the
warpgroups along N (tests/cpu/test_wgmma_split_n.py's programs), read from the plan, the generated call
(gemm_sm90.h's WGN) and the SASS (HGMMA of N/WGN columns); where the split cannot be described (B stored
[K][N] in one 128-byte row, or N/WGN not a multiple of the panel), the gemm stays on mma.sync."""
from __future__ import annotations

import os
import re
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_wgmma_split_n import split_gemm  # noqa: E402

pytestmark = pytest.mark.cuda_compile
SM90 = {"kind": "cuda", "arch": "sm_90a"}


@pytest.mark.sass
@pytest.mark.parametrize("trans_B", [False, True])
def test_64_rows_on_two_warpgroups_split_n(trans_B):
    k = tilelang.compile(split_gemm(128, 256, 192, trans_B=trans_B), target=SM90)
    plan = k.get_plan()
    assert "T.gemm 64x128x64 on wgmma, 2 warpgroup(s), 2 along N" in plan, plan
    src = k.get_kernel_source()
    assert re.search(r"tc::gemm_ss_sm90<64, 128, 64, 2, false, " + ("true" if trans_B else "false")
                     + r", tc::half_t, \d+, \d+, \d+, 2>", src), src
    assert re.search(r"HGMMA\.64x64x16\.F32", k.get_sass()), "each warpgroup issues m64n64k16"


def test_four_warpgroups_split_two_by_two():
    plan = tilelang.compile(split_gemm(128, 256, 128, block_M=128, threads=512, trans_B=True), target=SM90).get_plan()
    assert "T.gemm 128x128x64 on wgmma, 4 warpgroup(s), 2 along N" in plan, plan


def test_an_n_major_b_in_one_swizzle_row_cannot_split():
    # B [K][N] with N = 64 halves: one 128-byte row, its halves share a swizzle pattern: mma.sync
    plan = tilelang.compile(split_gemm(128, 128, 128, block_N=64), target=SM90).get_plan()
    assert "T.gemm 64x64x64 on mma.sync" in plan, plan
    plan = tilelang.compile(split_gemm(128, 128, 128, block_N=64, trans_B=True), target=SM90).get_plan()
    assert "2 along N" in plan, plan    # [N][K]: K-major, any multiple of 8 columns


def test_the_split_is_left_out_of_calls_that_do_not_split():
    src = tilelang.compile(split_gemm(128, 256, 128, block_M=128), target=SM90).get_kernel_source()
    assert re.search(r"tc::gemm_ss_sm90<128, 128, 64, 2, false, false, tc::half_t, \d+, \d+, \d+>", src), src

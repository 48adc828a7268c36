"""tilecraft/tma.h without a GPU: the TMA test kernels compile for sm_90a into the TMA load
instruction (UTMALDG) with the mbarrier protocol around it, the header stays harmless on sm_80, a
tensor map packs as a 128-byte kernel argument, and the host-side checks name the broken rule.
(On a Hopper GPU: tests/gpu/test_tma_gpu.py.)"""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft
from tilecraft.compiler import compile_cuda_nvrtc
from tilecraft.runtime.cuda_driver import ArgPacker
from tilecraft.runtime.tma import check_tma_2d

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tma_src import CASES, TILE_CASES, case_id, kernel_source, tile_case_id, tile_fill_source  # noqa: E402

needs_sass = pytest.mark.sass   # cuobjdump and nvdisasm (tests/conftest.py)


@needs_sass
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_tma_kernel_compiles_to_a_tensor_load(case):
    from tilecraft.compiler.sass import disassemble
    binary = compile_cuda_nvrtc(kernel_source(case), "sm_90a", include_dirs=[tilecraft.include_dir()])
    sass = disassemble(binary.cubin)
    assert "UTMALDG.2D" in sass, "the box load is one TMA instruction"
    assert "SYNCS" in sass, "mbarrier init / expect_tx / wait are the SYNCS unit's"


def test_tma_header_is_harmless_before_hopper():
    """tilecraft.h includes tma.h for every arch; on sm_80 only tc::TmaDesc and the mbarrier helpers exist."""
    src = kernel_source(CASES[0])
    compile_cuda_nvrtc(src, "sm_80", include_dirs=[tilecraft.include_dir()])


def test_tensor_map_packs_as_128_bytes():
    desc = bytes(range(128))
    p = ArgPacker(["tma_desc", "ptr", "int32", "int32", "ptr"])
    p.pack([desc, 0x1000, 7, 9, 0x2000])
    raw = p.raw()
    assert raw[:128] == desc and int.from_bytes(raw[128:136], "little") == 0x1000
    assert int.from_bytes(raw[136:140], "little") == 7 and int.from_bytes(raw[144:152], "little") == 0x2000


@pytest.mark.parametrize("kwargs, message", [
    (dict(address=0x1008), "16-byte aligned"),
    (dict(row_pitch_bytes=136 * 2 + 8), "multiple of 16 bytes"),
    (dict(box=(300, 64)), r"box dims must be in \[1, 256\]"),
    (dict(box=(64, 4)), "box row must be a multiple of 16 bytes"),
    (dict(box=(64, 128), swizzle=128), "at most 128 bytes"),
    (dict(swizzle=96), "swizzle must be one of"),
    (dict(dtype="float64"), "element type float64"),
])
def test_tma_requests_are_checked_on_the_host(kwargs, message):
    args = dict(address=0x1000, dtype="float16", shape=(200, 136), row_pitch_bytes=136 * 2, box=(64, 64),
                swizzle=128)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        check_tma_2d(**args)


def test_fp8_tensors_have_byte_tensor_maps():
    """8-bit floats load by TMA as bytes (no conversion; 0 past the edge is +0.0): 1-byte elements, box
    rows of 128 of them under the 128-byte swizzle, and no more."""
    args = dict(address=0x1000, shape=(200, 256), row_pitch_bytes=256, box=(128, 128), swizzle=128)
    assert check_tma_2d(dtype="float8_e4m3fn", **args) == 1 and check_tma_2d(dtype="float8_e5m2", **args) == 1
    with pytest.raises(ValueError, match="at most 128 bytes"):
        check_tma_2d(dtype="float8_e4m3fn", **{**args, "box": (128, 256)})


@needs_sass
@pytest.mark.parametrize("case", TILE_CASES, ids=tile_case_id)
def test_wgmma_tile_fill_compiles(case):
    from tilecraft.compiler.sass import disassemble
    from tilecraft.ir.layout.tma import sm90_tile_boxes
    binary = compile_cuda_nvrtc(tile_fill_source(case), "sm_90a", include_dirs=[tilecraft.include_dir()])
    dtype, rows, cols = case
    n_boxes = len(sm90_tile_boxes(rows, cols, {"float16": 2, "bfloat16": 2, "float32": 4}[dtype])[1])
    assert disassemble(binary.cubin).count("UTMALDG.2D") == n_boxes

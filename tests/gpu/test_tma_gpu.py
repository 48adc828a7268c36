"""tilecraft/tma.h and runtime/tma.py on a Hopper GPU: every case of tests/cuda/tma_src.py loads
each box of a ragged tensor (and of a column slice of a wider one, so the row pitch differs from
the row length) through a host-built tensor map; the kernel's logical read-back must equal the
tensor, and the box parts outside it must be zero-filled.  Then whole wgmma operand tiles are
filled with ir/layout/tma.py's box plan and read back through tc::swizzle_offset_sm90.

Written without GPU time (session 3): compiled and SASS-checked in CI
(tests/cuda/test_tma_header.py) but not yet run on hardware.  If a swizzled case fails while the
sw0 cases pass, the TMA pattern differs from tc::swizzle_offset for that span: compare the
read-back against the input to find the permutation.
"""
from __future__ import annotations

import functools
import os
import sys

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))
from tma_src import (CASES, TILE_CASES, case_id, kernel_source, smem_bytes, tile_case_id,  # noqa: E402
                     tile_fill_source, tile_smem_bytes)


def _need_hopper():
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA needs compute capability 9.0 or newer")


@functools.lru_cache(maxsize=None)
def _function(case):
    import tilecraft
    from tilecraft.compiler import compile_cuda_nvrtc
    from tilecraft.runtime.cuda_driver import CudaModule
    binary = compile_cuda_nvrtc(kernel_source(case), "sm_90a", include_dirs=[tilecraft.include_dir()])
    return CudaModule(binary.cubin).function("tma_tile")


def _random(shape, dtype):
    if dtype == torch.float32:
        return torch.randn(shape, device="cuda")
    return torch.randn(shape, device="cuda").to(dtype)


@pytest.mark.parametrize("layout", ["ragged", "column-slice"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_tma_box_loads_read_back_the_tensor(case, layout):
    _need_hopper()
    from tilecraft.runtime.tma import tma_desc_2d
    dtype_name, br, bc, sw = case
    dtype = getattr(torch, dtype_name)
    rows, cols = 3 * br + br // 2 + 1, 2 * bc + 8  # boxes past both ends
    if layout == "ragged":
        x = _random((rows, cols), dtype)
    else:
        x = _random((rows, cols + 3 * bc), dtype)[:, bc:bc + cols]  # pitch != row length, base offset
    out = torch.full((rows, cols), float("nan"), device="cuda").to(dtype)
    bad = torch.zeros(1, dtype=torch.int32, device="cuda")
    desc = tma_desc_2d(x, box=(br, bc), swizzle=sw)
    grid = (-(-cols // bc), -(-rows // br), 1)
    fn = _function(case)
    fn.launch(grid, (128, 1, 1), smem_bytes(case), torch.cuda.current_stream().cuda_stream,
              [("tma_desc", desc), ("ptr", out.data_ptr()), ("int32", rows), ("int32", cols),
               ("ptr", bad.data_ptr())])
    torch.cuda.synchronize()
    assert torch.equal(out, x), f"{case_id(case)} {layout}: read-back differs from the tensor"
    assert bad.item() == 0, f"{case_id(case)} {layout}: {bad.item()} out-of-bounds elements not zero-filled"


@functools.lru_cache(maxsize=None)
def _fill_function(case):
    import tilecraft
    from tilecraft.compiler import compile_cuda_nvrtc
    from tilecraft.runtime.cuda_driver import CudaModule
    binary = compile_cuda_nvrtc(tile_fill_source(case), "sm_90a", include_dirs=[tilecraft.include_dir()])
    return CudaModule(binary.cubin).function("tma_fill")


@pytest.mark.parametrize("case", TILE_CASES, ids=tile_case_id)
def test_box_plan_fills_the_wgmma_tile_layout(case):
    """sm90_tile_boxes' boxes land where tc::swizzle_offset_sm90 (the wgmma descriptors' layout)
    expects every element: a TMA-fed wgmma main loop can keep today's operand layout."""
    _need_hopper()
    from tilecraft.ir.layout.tma import sm90_tile_boxes
    from tilecraft.runtime.tma import tma_desc_2d
    dtype_name, rows, cols = case
    dtype = getattr(torch, dtype_name)
    x = _random((2 * rows, 3 * cols), dtype)
    swizzle, boxes = sm90_tile_boxes(rows, cols, x.element_size())
    _, _, _, br, bc = boxes[0]
    desc = tma_desc_2d(x, box=(br, bc), swizzle=swizzle)
    out = torch.full_like(x, float("nan"))
    _fill_function(case).launch((3, 2, 1), (128, 1, 1), tile_smem_bytes(case),
                                torch.cuda.current_stream().cuda_stream,
                                [("tma_desc", desc), ("ptr", out.data_ptr()), ("int32", 3 * cols)])
    torch.cuda.synchronize()
    assert torch.equal(out, x), f"{tile_case_id(case)}: the tile read back through the wgmma layout differs"

"""The TMA box plan for wgmma operand tiles (ir/layout/tma.py::sm90_tile_boxes), checked element by
element on the host: every element of the tile is written by exactly one box, at the offset
tc::swizzle_offset_sm90 gives it (the Python model of tests/cuda/gemm_sm90_src.py).  The box
landing model (`box_offset`) is the PTX swizzle rule; tests/gpu/test_tma_gpu.py checks it on the
hardware."""
from __future__ import annotations

import os
import sys

import pytest

from tilecraft.ir.layout.tma import box_offset, plain_tile_boxes, sm90_tile_boxes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))
from gemm_sm90_src import swizzle_offset_sm90  # noqa: E402


@pytest.mark.parametrize("rows, cols, eb", [
    (128, 64, 2), (64, 64, 2), (64, 32, 2), (64, 16, 2), (16, 8, 2), (512, 64, 2),   # one box (or 256-row boxes)
    (64, 128, 2), (64, 256, 2), (32, 192, 2), (64, 64, 4), (64, 32, 4),             # column panels
    (512, 128, 2),                                                                   # 256-row panel boxes
])
def test_boxes_fill_the_sm90_layout_exactly(rows, cols, eb):
    swizzle, boxes = sm90_tile_boxes(rows, cols, eb)
    where = {}
    for off, r0, c0, br, bc in boxes:
        assert 1 <= br <= 256 and 1 <= bc <= 256 and (bc * eb) % 16 == 0
        assert swizzle == 0 or bc * eb == swizzle, "a swizzled box row spans the swizzle exactly"
        assert (off * eb) % (1024 if swizzle == 128 else max(swizzle, 16) * 8 if swizzle else 128) == 0, \
            "box starts aligned to its swizzle pattern"
        for r in range(br):
            for c in range(bc):
                where.setdefault((r0 + r, c0 + c), []).append(off + box_offset(swizzle, eb, bc, r, c))
    assert len(where) == rows * cols
    for (r, c), offs in where.items():
        assert offs == [swizzle_offset_sm90(cols, eb, r, c, rows)], (r, c, offs)


def test_tiles_without_a_plan_are_refused():
    with pytest.raises(ValueError, match="no TMA box plan"):
        sm90_tile_boxes(64, 48, 2)   # 96-byte rows
    with pytest.raises(ValueError, match="no TMA box plan"):
        sm90_tile_boxes(12, 128, 2)  # atoms need whole 8-row groups


@pytest.mark.parametrize("shape, eb", [((128,), 4), ((256,), 2), ((4, 64), 4), ((300, 8), 4), ((512, 16), 2)])
def test_plain_boxes_fill_a_row_major_tile_exactly(shape, eb):
    """A tile no tensor-core gemm reads (per-row scales, say) stays row-major: unswizzled boxes of whole rows."""
    rows, cols = (1, shape[0]) if len(shape) == 1 else shape
    if rows > 256 and rows % 256:
        with pytest.raises(ValueError, match="no TMA box plan"):
            plain_tile_boxes(shape, eb)
        return
    swizzle, boxes = plain_tile_boxes(shape, eb)
    assert swizzle == 0
    seen = []
    for off, r0, c0, br, bc in boxes:
        assert 1 <= br <= 256 and bc == cols and c0 == 0 and (bc * eb) % 16 == 0
        seen += [off + box_offset(0, eb, bc, r, c) for r in range(br) for c in range(bc)]
        assert [off + box_offset(0, eb, bc, r, c) for r in range(br) for c in range(bc)] == \
            [(r0 + r) * cols + c for r in range(br) for c in range(bc)]
    assert sorted(seen) == list(range(rows * cols))


def test_plain_tiles_without_a_plan_are_refused():
    with pytest.raises(ValueError, match="no TMA box plan"):
        plain_tile_boxes((6,), 2)        # 12-byte rows
    with pytest.raises(ValueError, match="no TMA box plan"):
        plain_tile_boxes((2, 512), 4)    # rows of 512 elements: over one box dim


def test_tensor_map_encoding_passes_the_bindings_type_checks(monkeypatch):
    """cuTensorMapEncodeTiled through cuda-bindings takes cuuint32_t / cuuint64_t wrappers, not
    Python ints: with ints every TMA kernel failed on its first launch (TypeError inside the
    bindings).  Without a driver the call must get past argument conversion to the driver itself."""
    driver = pytest.importorskip("cuda.bindings.driver")
    from tilecraft.runtime import tma

    calls = []
    real = driver.cuTensorMapEncodeTiled

    def spy(*args):
        calls.append(args)
        try:
            return real(*args)
        except TypeError:
            raise
        except Exception:  # no driver library here: the arguments were converted, that is the point
            return (driver.CUresult.CUDA_SUCCESS, type("Map", (), {"opaque": [0] * 16})())

    monkeypatch.setattr(driver, "cuTensorMapEncodeTiled", spy)
    monkeypatch.setattr(tma, "_init_driver", lambda: driver)
    raw = tma.tma_desc_2d_raw(0x10000, "float16", (64, 256), 512, (64, 64), 128)
    assert len(raw) == tma.DESC_BYTES and len(calls) == 1

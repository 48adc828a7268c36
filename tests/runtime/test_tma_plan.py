"""The TMA box plan for wgmma operand tiles (ir/layout/tma.py::sm90_tile_boxes), checked element by
element on the host: every element of the tile is written by exactly one box, at the offset
tc::swizzle_offset_sm90 gives it (the Python model of tests/cuda/gemm_sm90_src.py).  The box
landing model (`box_offset`) is the PTX swizzle rule; tests/gpu/test_tma_gpu.py checks it on the
hardware."""
from __future__ import annotations

import os
import sys

import pytest

from tilecraft.ir.layout.tma import box_offset, plain_tile_boxes, row_split, sm90_tile_boxes

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
        plain_tile_boxes((2, 257 * 4), 4)    # 1028 elements: no piece of <= 256 in <= 256 pieces of 16-byte multiples
    assert row_split(257 * 4, 4) == 0


@pytest.mark.parametrize("cols, eb, split", [(512, 1, 256), (512, 4, 256), (576, 2, 192), (65536, 1, 256), (300, 4, 100), (258, 2, 0)])
def test_a_long_plain_row_splits_into_box_pieces(cols, eb, split):
    """A plain row over 256 elements (an fp8 KV row of 512): the tensor map views the last dim as
    [cols / s][s] (runtime: tensor.unflatten(-1, ...)), s the largest piece that keeps both box dims <= 256
    and the piece a multiple of 16 bytes."""
    assert row_split(cols, eb) == split
    if split:
        assert cols % split == 0 and split <= 256 and cols // split <= 256 and (split * eb) % 16 == 0
        assert not any(cols % s == 0 and (s * eb) % 16 == 0 and cols // s <= 256 for s in range(split + 1, 257))
        assert plain_tile_boxes((3, cols), eb)[1] == [(0, 0, 0, 3, cols)]


def test_the_kv_tile_of_fp8_mla_decode_loads_by_tma_with_a_split_row():
    """MLA decode with fp8 KV: its [64][512] fp8 KV tile is one TMA box of the [batch][seq][2][256] view,
    the loop then warp-specialized (session 20: cp.async, no producer warpgroup); the box checked against
    cuTensorMapEncodeTiled's rules as the launcher builds it."""
    import tilecraft as tilelang
    from tilecraft.kernels import decode as D
    from tilecraft.runtime.tma import check_tma
    f = D.mla_decode_split
    k = tilelang.compile(f.fn(64, 16, 8192, num_split=4, kv_dtype="float8_e4m3fn"), out_idx=[-2, -1],
                         target={"kind": "cuda", "arch": "sm_90a"}, pass_configs=f.compile_kwargs["pass_configs"])
    assert "warp-specialized" in k.get_plan() and "not loaded by TMA" not in k.get_plan(), k.get_plan()
    kv = next(d for d in k.artifact.meta["tma"] if d["param"] == 2)   # KV, the third parameter
    assert kv == {"param": 2, "box": [1, 64, 2, 256], "swizzle": 0, "split": 256}, kv
    assert "tc::tma_load_tile((&KV_fp8[(k_load % 2) * 32768]), 0, tc_tma_0, (&tma_full[(k_load % 2)]), 0, 0, " \
        in k.get_kernel_source()
    # the launcher's view of a [64, 8192, 512] fp8 tensor: [64, 8192, 2, 256], strides 4 MiB / 512 / 256 bytes
    check_tma(0, "float8_e4m3fn", (64, 8192, 2, 256), (8192 * 512, 512, 256), tuple(kv["box"]), 0)
    with pytest.raises(ValueError, match="box dims must be in"):
        check_tma(0, "float8_e4m3fn", (64, 8192, 512), (8192 * 512, 512), (1, 64, 512), 0)

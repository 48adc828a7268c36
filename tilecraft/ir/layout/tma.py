"""Which TMA boxes fill a shared tile in the layout the wgmma descriptors read
(tc::swizzle_offset_sm90, device/include/tilecraft/gemm_sm90.h) or a plain row-major one (a tile no
tensor-core gemm reads: per-row scales, a bias), and where a box's elements land.
Used by the TMA loop forms (transform/plan_pipelines.py, transform/pipelining/) and checked element by element in
tests/runtime/test_tma_plan.py."""
from __future__ import annotations

from ..lowering import SWIZZLE_SM90

# element type -> (CUtensorMapDataType member, bytes): what a tensor map can describe (runtime/tma.py builds them).
# Integers map to the unsigned type of their width and 8-bit floats to bytes: TMA copies bits, and its
# out-of-range fill (0) is the same bits either way.
TMA_DTYPES = {
    "float16": ("CU_TENSOR_MAP_DATA_TYPE_FLOAT16", 2),
    "bfloat16": ("CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 2),
    "float32": ("CU_TENSOR_MAP_DATA_TYPE_FLOAT32", 4),
    "int32": ("CU_TENSOR_MAP_DATA_TYPE_INT32", 4),
    "uint32": ("CU_TENSOR_MAP_DATA_TYPE_UINT32", 4),
    "int16": ("CU_TENSOR_MAP_DATA_TYPE_UINT16", 2),
    "uint16": ("CU_TENSOR_MAP_DATA_TYPE_UINT16", 2),
    "uint8": ("CU_TENSOR_MAP_DATA_TYPE_UINT8", 1),
    "int8": ("CU_TENSOR_MAP_DATA_TYPE_UINT8", 1),
    "float8_e4m3fn": ("CU_TENSOR_MAP_DATA_TYPE_UINT8", 1),
    "float8_e5m2": ("CU_TENSOR_MAP_DATA_TYPE_UINT8", 1),
}


def _box_swizzle_chunk(swizzle: int, row: int) -> int:
    """The XOR the TMA applies to a 16-byte chunk index in row `row` of a box (rows of `swizzle`
    bytes): address bits [4, 4+log2(S/16)) ^= bits [7, ...), i.e. row % 8, (row / 2) % 4, (row / 4) % 2."""
    return {0: 0, 32: (row >> 2) & 1, 64: (row >> 1) & 3, 128: row & 7}[swizzle]


def box_offset(swizzle: int, elem_bytes: int, box_cols: int, row: int, col: int) -> int:
    """Element offset, from the box's shared-memory start, where a TMA load puts element
    (row, col) of a box `box_cols` wide: rows are packed, 16-byte chunks permuted by the swizzle."""
    epc = 16 // elem_bytes
    return row * box_cols + ((col // epc) ^ _box_swizzle_chunk(swizzle, row)) * epc + col % epc


def tma_tensor_ok(tensor, tile, swizzled: bool = True) -> bool:
    """Whether `tensor` (a global buffer) can have a tensor map that loads the shared `tile`:
    2 to 5 static dims each under 2^31 (TMA coordinates are int32), 2- or 4-byte elements (or 8-bit floats) of
    the tile's type, rows a multiple of 16 bytes, and a box plan for the tile's shape (`swizzled`: a 2-D tile in
    the wgmma layout, `sm90_tile_boxes`; else a plain row-major tile of 1 or 2 dims, `plain_tile_boxes`).
    The copied region and the tile's layout are checked apart."""
    return tma_tensor_problem(tensor, tile, swizzled) is None


def tile_boxes(shape, elem_bytes: int, swizzled: bool) -> tuple[int, list]:
    """`sm90_tile_boxes` for a tile in the wgmma layout, else `plain_tile_boxes` (a 1-D tile is one row)."""
    if swizzled:
        if len(shape) != 2:
            raise ValueError(f"a wgmma operand tile is 2-D, this one is {len(shape)}-D")
        return sm90_tile_boxes(shape[0], shape[1], elem_bytes)
    return plain_tile_boxes(shape, elem_bytes)


def tma_tensor_problem(tensor, tile, swizzled: bool = True) -> str | None:
    """The first condition of `tma_tensor_ok` that fails, in words, or None."""
    if not 2 <= tensor.ndim <= 5:
        return f"{tensor.name} has {tensor.ndim} dims (TMA maps tensors of 2 to 5)"
    if tile.ndim not in ((2,) if swizzled else (1, 2)):
        return f"the tile {tile.name} is {tile.ndim}-D (TMA fills {'2-D' if swizzled else '1-D and 2-D'} tiles here)"
    if not all(isinstance(x, int) for x in tensor.shape):
        return f"{tensor.name} has a symbolic shape (its tensor map is made once, for a static shape)"
    if tensor.dtype != tile.dtype:
        return f"{tensor.name} is {tensor.dtype} but {tile.name} is {tile.dtype} (TMA copies bytes: no type change)"
    if (tensor.dtype.bytes not in (2, 4) and tensor.dtype.name not in ("float8_e4m3fn", "float8_e5m2")) \
            or tensor.dtype.name not in TMA_DTYPES:
        return (f"{tensor.name} has {tensor.dtype.name} elements (a tensor map here: "
                f"{', '.join(n for n, (_, b) in TMA_DTYPES.items() if b > 1)} or an 8-bit float)")
    if (tensor.shape[-1] * tensor.dtype.bytes) % 16:
        return (f"{tensor.name}'s rows are {tensor.shape[-1] * tensor.dtype.bytes} bytes, not a multiple of 16 "
                f"(a tensor map's strides are)")
    if any(x >= 2 ** 31 for x in tensor.shape):
        return f"{tensor.name} {tuple(tensor.shape)} has a dimension of 2^31 or more (TMA coordinates are int32)"
    try:
        tile_boxes(tuple(tile.shape), tile.dtype.bytes, swizzled)
    except ValueError as e:
        return f"the tile {tile.name} {tuple(tile.shape)}: {e}"
    if not swizzled and tile.shape[-1] > 256:   # a split row (row_split): one more tensor-map dim
        if tensor.shape[-1] != tile.shape[-1]:
            return (f"the tile {tile.name}'s rows ({tile.shape[-1]} elements, over one 256-element box dim) are "
                    f"split by the tensor map, which needs them to be {tensor.name}'s whole rows "
                    f"({tensor.shape[-1]} elements)")
        if tensor.ndim > 4:
            return f"{tensor.name} has {tensor.ndim} dims and a split row needs one more (TMA maps up to 5)"
    return None


def tma_copy_problem(c, own_tensor: bool, layout: str | None, zero_fill_ok: bool = True) -> str:
    """Why the tile copy `c` is not loaded by TMA: the first failing condition, in words (for the plan
    notes).  `own_tensor`: its source is a kernel parameter (a view has no tensor map of its own);
    `layout`: its tile's shared layout (SWIZZLE_SM90: the wgmma one, None: plain row-major, else a swizzle
    TMA does not write); `zero_fill_ok`: elements past the tensor may read as 0 (no non-zero safe value is
    asked for)."""
    src, b, d = c.src, c.src.buffer, c.dst.buffer
    if not own_tensor:
        return f"{b.name} is a view of another tensor's storage, which has no tensor map of its own"
    if layout not in (None, SWIZZLE_SM90):
        return f"the tile {d.name} is in the mma.sync swizzle (an mma.sync gemm reads it), which TMA does not write"
    problem = tma_tensor_problem(b, d, layout == SWIZZLE_SM90)
    if problem:
        return problem
    if not zero_fill_ok:
        return (f"its out-of-range elements must read as a non-zero T.annotate_safe_value / T.annotate_padding, "
                f"and TMA reads them as 0")
    ext = [int(e.value) if hasattr(e, "value") else e for e in src.extents]
    if len([i for i in range(b.ndim - 1) if ext[i] != 1]) > (1 if d.ndim == 2 else 0):
        return f"the copied region {tuple(ext)} spans more than {'one dimension' if d.ndim == 2 else 'its last dimension'} besides the last"
    return f"the copied region {tuple(ext)} is not the whole tile {d.name} {tuple(d.shape)}"


def sm90_tile_boxes(rows: int, cols: int, elem_bytes: int) -> tuple[int, list]:
    """How TMA fills a [rows][cols] shared tile laid out by tc::swizzle_offset_sm90 (the layout the
    wgmma descriptors read): (swizzle bytes, [(smem element offset, row0, col0, box_rows,
    box_cols), ...]).  Rows of 16/32/64/128 bytes: the tile is whole boxes of up to 256 rows with
    the matching swizzle.  Longer rows (a multiple of 128 bytes) are stored as 8-row x 128-byte
    atoms in column panels, panel after panel (each [rows][128 / elem_bytes]), so each panel is
    one box of up to 256 rows with the 128-byte swizzle."""
    rb = cols * elem_bytes
    if rb in (16, 32, 64, 128):
        swizzle = 0 if rb == 16 else rb
        return swizzle, [(r0 * cols, r0, 0, min(256, rows - r0), cols) for r0 in range(0, rows, 256)]
    if rb % 128 or rows % 8 or (rows > 256 and rows % 256):  # one tensor map: every box the same shape
        raise ValueError(f"TMA: a [{rows}][{cols}] tile of {elem_bytes}-byte elements has no TMA box plan "
                         f"(rows of {rb} bytes: need 16/32/64/128 or a multiple of 128 with rows % 8 == 0)")
    w = 128 // elem_bytes
    return 128, [(p * rows * w + r0 * w, r0, p * w, min(256, rows - r0), w)
                 for p in range(cols // w) for r0 in range(0, rows, 256)]


def row_split(cols: int, elem_bytes: int) -> int:
    """For a plain row longer than one box dim (256 elements): the piece length s (the largest divisor of
    `cols` of at most 256 elements and a multiple of 16 bytes, with at most 256 pieces) by which the tensor
    map views its last dim as [cols / s][s], so that one box of [rows][cols / s][s] is the row-major
    [rows][cols] tile; 0 when the row fits one box dim or no such s exists."""
    if cols <= 256:
        return 0
    return next((s for s in range(256, 0, -1) if cols % s == 0 and (s * elem_bytes) % 16 == 0 and cols // s <= 256), 0)


def plain_tile_boxes(shape, elem_bytes: int) -> tuple[int, list]:
    """How TMA fills a plain row-major shared tile of 1 or 2 dims (a 1-D tile is one row) without a
    swizzle: (0, [(smem element offset, row0, col0, box_rows, box_cols), ...]), boxes of up to 256
    whole rows.  A row must be a multiple of 16 bytes and at most 256 elements (one box dim), or split by
    `row_split` (the tensor map then has one more dim; the copy must cover its tensor's whole rows)."""
    rows, cols = (1, shape[0]) if len(shape) == 1 else tuple(shape)
    rb = cols * elem_bytes
    if rb % 16 or (cols > 256 and not row_split(cols, elem_bytes)) or (rows > 256 and rows % 256):
        raise ValueError(f"TMA: a plain [{rows}][{cols}] tile of {elem_bytes}-byte elements has no TMA box plan "
                         f"(rows of {rb} bytes: need a multiple of 16 bytes and at most 256 elements, or a "
                         f"length that splits into at most 256 pieces of at most 256; over 256 rows, a multiple of 256)")
    return 0, [(r0 * cols, r0, 0, min(256, rows - r0), cols) for r0 in range(0, rows, 256)]

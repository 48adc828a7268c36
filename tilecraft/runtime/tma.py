"""TMA tensor maps on the host: the 128-byte descriptor a Hopper kernel's `tc::tma_load_2d` reads
(device/include/tilecraft/tma.h says how the kernel uses it).

    desc = tma_desc_2d(tensor, box=(64, 64), swizzle=128)     # bytes, 128 of them
    fn.launch(grid, block, smem, stream, [("tma_desc", desc), ("ptr", out.data_ptr())])

The descriptor holds the tensor's address, so it is built per tensor (cheap: one driver call that
touches no GPU state).  Every hardware rule is checked here first, so a bad request is a
ValueError naming the rule instead of CUDA_ERROR_INVALID_VALUE from the driver.
"""
from __future__ import annotations

from typing import Any

from .cuda_driver import _drv, _init_driver, check

# torch dtype name -> (CUtensorMapDataType member, element bytes)
_DTYPES = {
    "float16": ("CU_TENSOR_MAP_DATA_TYPE_FLOAT16", 2),
    "bfloat16": ("CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 2),
    "float32": ("CU_TENSOR_MAP_DATA_TYPE_FLOAT32", 4),
    "int32": ("CU_TENSOR_MAP_DATA_TYPE_INT32", 4),
    "uint8": ("CU_TENSOR_MAP_DATA_TYPE_UINT8", 1),
    "int8": ("CU_TENSOR_MAP_DATA_TYPE_UINT8", 1),
}
_SWIZZLES = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B",
             64: "CU_TENSOR_MAP_SWIZZLE_64B", 128: "CU_TENSOR_MAP_SWIZZLE_128B"}
DESC_BYTES = 128


def check_tma_2d(address: int, dtype: str, shape: tuple, row_pitch_bytes: int, box: tuple, swizzle: int) -> int:
    """Validate a 2-D tiled TMA request; return the element size.  Raises ValueError naming the
    broken rule (cuTensorMapEncodeTiled's requirements, restricted to what tilecraft uses)."""
    if dtype not in _DTYPES:
        raise ValueError(f"TMA: element type {dtype} is not supported; use one of {sorted(_DTYPES)}")
    esize = _DTYPES[dtype][1]
    rows, cols = shape
    box_rows, box_cols = box
    if swizzle not in _SWIZZLES:
        raise ValueError(f"TMA: swizzle must be one of {sorted(_SWIZZLES)} (bytes), got {swizzle}")
    if address % 16:
        raise ValueError(f"TMA: the tensor's address must be 16-byte aligned (it is {address:#x})")
    if not (1 <= rows < 2 ** 32 and 1 <= cols < 2 ** 32):
        raise ValueError(f"TMA: tensor dims must be in [1, 2^32), got {rows} x {cols}")
    if row_pitch_bytes % 16 or row_pitch_bytes < cols * esize:
        raise ValueError(f"TMA: the row pitch must be a multiple of 16 bytes and cover a row "
                         f"({cols} x {esize} bytes); got {row_pitch_bytes} bytes")
    if not (1 <= box_rows <= 256 and 1 <= box_cols <= 256):
        raise ValueError(f"TMA: box dims must be in [1, 256], got {box_rows} x {box_cols}")
    if (box_cols * esize) % 16:
        raise ValueError(f"TMA: a box row must be a multiple of 16 bytes, got {box_cols} x {esize}")
    if swizzle and box_cols * esize > swizzle:
        raise ValueError(f"TMA: with a {swizzle}-byte swizzle a box row may span at most {swizzle} bytes, "
                         f"got {box_cols} x {esize} = {box_cols * esize}")
    return esize


def tma_desc_2d_raw(address: int, dtype: str, shape: tuple, row_pitch_bytes: int, box: tuple,
                    swizzle: int = 0) -> bytes:
    """The tensor map of a row-major [rows][cols] tensor at `address` (row pitch in bytes), loaded
    in boxes of (box_rows, box_cols) elements with the given shared-memory swizzle (0/32/64/128)."""
    check_tma_2d(address, dtype, shape, row_pitch_bytes, box, swizzle)
    _init_driver()
    d = _drv()
    rows, cols = shape
    box_rows, box_cols = box
    u32, u64 = d.cuuint32_t, d.cuuint64_t   # the bindings take these wrappers, not Python ints
    tmap = check(d.cuTensorMapEncodeTiled(
        getattr(d.CUtensorMapDataType, _DTYPES[dtype][0]), 2, address,
        [u64(cols), u64(rows)],                  # innermost first
        [u64(row_pitch_bytes)],                  # strides of dims 1.. in bytes
        [u32(box_cols), u32(box_rows)],
        [u32(1), u32(1)],                        # element strides
        d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(d.CUtensorMapSwizzle, _SWIZZLES[swizzle]),
        d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
    raw = b"".join(int(w).to_bytes(8, "little") for w in tmap.opaque)
    assert len(raw) == DESC_BYTES
    return raw


def tma_desc_2d(tensor: Any, box: tuple, swizzle: int = 0) -> bytes:
    """The tensor map of a 2-D CUDA torch tensor whose last dim is contiguous."""
    if tensor.dim() != 2 or tensor.stride(1) != 1:
        raise ValueError(f"TMA: needs a 2-D tensor with a contiguous last dim, got shape "
                         f"{tuple(tensor.shape)} strides {tuple(tensor.stride())}")
    dtype = str(tensor.dtype).replace("torch.", "")
    esize = tensor.element_size()
    return tma_desc_2d_raw(tensor.data_ptr(), dtype, tuple(tensor.shape), tensor.stride(0) * esize, box, swizzle)


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

from ..ir.layout.tma import TMA_DTYPES as _DTYPES   # dtype name -> (CUtensorMapDataType member, element bytes)
_SWIZZLES = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B",
             64: "CU_TENSOR_MAP_SWIZZLE_64B", 128: "CU_TENSOR_MAP_SWIZZLE_128B"}
DESC_BYTES = 128


def check_tma(address: int, dtype: str, shape: tuple, strides_bytes: tuple, box: tuple, swizzle: int) -> int:
    """Validate a tiled TMA request over a row-major tensor of 2 to 5 dims (`shape`, `box` outermost
    first; `strides_bytes` of every dim but the last, which is contiguous); return the element size.
    Raises ValueError naming the broken rule (cuTensorMapEncodeTiled's requirements, restricted to
    what tilecraft uses)."""
    if dtype not in _DTYPES:
        raise ValueError(f"TMA: element type {dtype} is not supported; use one of {sorted(_DTYPES)}")
    esize = _DTYPES[dtype][1]
    if not 2 <= len(shape) <= 5 or len(box) != len(shape) or len(strides_bytes) != len(shape) - 1:
        raise ValueError(f"TMA: tensors of 2 to 5 dims with a box dim per tensor dim, got shape {shape}, box {box}")
    if swizzle not in _SWIZZLES:
        raise ValueError(f"TMA: swizzle must be one of {sorted(_SWIZZLES)} (bytes), got {swizzle}")
    if address % 16:
        raise ValueError(f"TMA: the tensor's address must be 16-byte aligned (it is {address:#x})")
    if not all(1 <= d < 2 ** 32 for d in shape):
        raise ValueError(f"TMA: tensor dims must be in [1, 2^32), got {shape}")
    for d, st in enumerate(strides_bytes):
        if st % 16:
            raise ValueError(f"TMA: every stride must be a multiple of 16 bytes; dim {d} has {st} bytes")
    if strides_bytes[-1] < shape[-1] * esize:
        raise ValueError(f"TMA: the row pitch must cover a row ({shape[-1]} x {esize} bytes); got {strides_bytes[-1]} bytes")
    if not all(1 <= b <= 256 for b in box):
        raise ValueError(f"TMA: box dims must be in [1, 256], got {box}")
    if (box[-1] * esize) % 16:
        raise ValueError(f"TMA: a box row must be a multiple of 16 bytes, got {box[-1]} x {esize}")
    if swizzle and box[-1] * esize > swizzle:
        raise ValueError(f"TMA: with a {swizzle}-byte swizzle a box row may span at most {swizzle} bytes, "
                         f"got {box[-1]} x {esize} = {box[-1] * esize}")
    return esize


def check_tma_2d(address: int, dtype: str, shape: tuple, row_pitch_bytes: int, box: tuple, swizzle: int) -> int:
    """check_tma for a 2-D [rows][cols] tensor with the given row pitch."""
    return check_tma(address, dtype, tuple(shape), (row_pitch_bytes,), tuple(box), swizzle)


def tma_desc_raw(address: int, dtype: str, shape: tuple, strides_bytes: tuple, box: tuple,
                 swizzle: int = 0) -> bytes:
    """The tensor map of a row-major tensor at `address` (`shape` and `box` outermost first,
    `strides_bytes` of all dims but the contiguous last), with the given shared-memory swizzle."""
    check_tma(address, dtype, shape, strides_bytes, box, swizzle)
    d = _init_driver()
    u32, u64 = d.cuuint32_t, d.cuuint64_t   # the bindings take these wrappers, not Python ints
    rank = len(shape)
    tmap = check(d.cuTensorMapEncodeTiled(
        getattr(d.CUtensorMapDataType, _DTYPES[dtype][0]), rank, address,
        [u64(x) for x in reversed(shape)],              # innermost first
        [u64(x) for x in reversed(strides_bytes)],      # strides of dims 1.. in bytes
        [u32(x) for x in reversed(box)],
        [u32(1)] * rank,                                # element strides
        d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(d.CUtensorMapSwizzle, _SWIZZLES[swizzle]),
        d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
    raw = b"".join(int(w).to_bytes(8, "little") for w in tmap.opaque)
    assert len(raw) == DESC_BYTES
    return raw


def tma_desc_2d_raw(address: int, dtype: str, shape: tuple, row_pitch_bytes: int, box: tuple,
                    swizzle: int = 0) -> bytes:
    """The tensor map of a row-major [rows][cols] tensor at `address` (row pitch in bytes), loaded
    in boxes of (box_rows, box_cols) elements with the given shared-memory swizzle (0/32/64/128)."""
    return tma_desc_raw(address, dtype, tuple(shape), (row_pitch_bytes,), tuple(box), swizzle)


def tma_desc(tensor: Any, box: tuple, swizzle: int = 0) -> bytes:
    """The tensor map of a CUDA torch tensor of 2 to 5 dims whose last dim is contiguous, loaded in
    boxes of `box` (one size per dim, outermost first)."""
    if tensor.dim() < 2 or tensor.stride(-1) != 1:
        raise ValueError(f"TMA: needs a tensor of 2 or more dims with a contiguous last dim, got shape "
                         f"{tuple(tensor.shape)} strides {tuple(tensor.stride())}")
    dtype = str(tensor.dtype).replace("torch.", "")
    esize = tensor.element_size()
    strides = tuple(st * esize for st in tensor.stride()[:-1])
    return tma_desc_raw(tensor.data_ptr(), dtype, tuple(tensor.shape), strides, tuple(box), swizzle)


def tma_desc_2d(tensor: Any, box: tuple, swizzle: int = 0) -> bytes:
    """The tensor map of a 2-D CUDA torch tensor whose last dim is contiguous."""
    if tensor.dim() != 2:
        raise ValueError(f"TMA: needs a 2-D tensor with a contiguous last dim, got shape "
                         f"{tuple(tensor.shape)} strides {tuple(tensor.stride())}")
    return tma_desc(tensor, box, swizzle)

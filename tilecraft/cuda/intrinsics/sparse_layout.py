"""Metadata of 2:4 (and, for 32-bit floats, 1:2) structured sparsity, as TileLang's
`tilelang.cuda.intrinsics.sparse_layout` states it for programs that build their own compressors.

`GROUP_CONFIG[dtype] = (kept, group)`: `kept` nonzeros survive in every `group` consecutive elements
along K.  Each kept element's position in its group takes 2 bits, so a group needs 4 bits of
metadata, and a metadata element of `b` bits indexes `b // 4` groups.
"""
from __future__ import annotations

from ...ir import dtype as _dt

GROUP_CONFIG = {
    _dt.float32: (1, 2),
    _dt.float16: (2, 4),
    _dt.bfloat16: (2, 4),
    _dt.int8: (2, 4),
    _dt.uint8: (2, 4),
    _dt.float8_e4m3fn: (2, 4),
    _dt.float8_e5m2: (2, 4),
}

METADATA_BITS_PER_GROUP = 4


def get_e_factor(a_dtype, meta_dtype) -> int:
    """How many elements of the dense A (of `a_dtype`) one metadata element (of `meta_dtype`) covers."""
    _, group = GROUP_CONFIG[_dt.dtype(a_dtype)]
    return _dt.dtype(meta_dtype).bits // METADATA_BITS_PER_GROUP * group


def get_e_replicate_factor(a_dtype) -> int:
    """How many consecutive threads of an mma.sp share one metadata value: 1 for 8-bit A, else 2."""
    return 1 if _dt.dtype(a_dtype).bits <= 8 else 2

"""`tilelang.quantize`: helpers for kernels over packed low-bit integers.

What is here, with TileLang's meaning:
  - `_tir_packed_int_to_int_convert(storage_type, storage_nbit)(nbit, val, pos, dtype)`: field `pos`
    (nbit bits wide, counted from the least significant bit) of the packed storage value `val`,
    read as a signed nbit integer (sign-extended) and converted to `dtype`;
  - `_tir_packed_to_unsigned_convert(...)(nbit, val, pos, dtype)`: the same field read unsigned;
  - `_tir_packed_to_unsigned_convert_with_zeros(...)(nbit, val, pos, zero, dtype)`: minus `zero`;
  - `utils.interleave_weight` / `utils.general_compress`: host-side packing of weights (utils.py).
These build ordinary tilecraft expressions, so they run on every target.

  - `get_lop3_intrin_group(...)`: {"func_name", "c_source"} of a fast decoder a kernel pastes in with
    `T.import_source` and calls with `T.call_extern` (lop3.py: 4-bit fields to float16; other formats
    raise an error that says what is there).
"""
from __future__ import annotations

from ..errors import TilecraftError
from .lop3 import get_lop3_intrin_group
from ..ir import as_expr, binary, cast, const
from ..ir import dtype as dt

__all__ = ["_tir_packed_int_to_int_convert", "_tir_packed_to_unsigned_convert",
           "_tir_packed_to_unsigned_convert_with_zeros", "get_lop3_intrin_group"]


def _field(storage: str, nbit: int, val, pos):
    """Bits [pos * nbit, (pos + 1) * nbit) of `val` as a non-negative int32."""
    if not isinstance(nbit, int) or not 0 < nbit <= 32:
        raise TilecraftError(f"tilelang.quantize: nbit must be an integer in 1..32, got {nbit!r}")
    v = as_expr(val)
    want = dt.dtype(storage)
    if v.dtype != want:
        raise TilecraftError(f"tilelang.quantize: the packed value must be {want} (the converter was made for "
                             f"that storage), got {v.dtype}")
    shift = binary("*", cast(as_expr(pos), dt.int32), const(nbit, dt.int32))
    # shifting the storage-typed value: C promotes it to int first, and the mask keeps only the
    # field's bits, so a sign-extended signed storage byte gives the same field
    mask = const((1 << nbit) - 1 if nbit < 32 else -1, dt.int32)
    return binary("&", binary(">>", cast(v, dt.int32), shift), mask)


def _tir_packed_int_to_int_convert(storage_type="uint", storage_nbit=8):
    storage = f"{storage_type}{storage_nbit}"

    def f_convert(nbit, val, pos, dtype):
        u = _field(storage, nbit, val, pos)
        if nbit < 32:  # sign-extend: flip the sign bit, then subtract it back
            sign = const(1 << (nbit - 1), dt.int32)
            u = binary("-", binary("^", u, sign), sign)
        return cast(u, dt.dtype(dtype))
    return f_convert


def _tir_packed_to_unsigned_convert(storage_type="uint", storage_nbit=8):
    storage = f"{storage_type}{storage_nbit}"

    def f_convert(nbit, val, pos, dtype):
        return cast(_field(storage, nbit, val, pos), dt.dtype(dtype))
    return f_convert


def _tir_packed_to_unsigned_convert_with_zeros(storage_type="uint", storage_nbit=8):
    storage = f"{storage_type}{storage_nbit}"

    def f_convert(nbit, val, pos, zero, dtype):
        return cast(binary("-", _field(storage, nbit, val, pos), zero), dt.dtype(dtype))
    return f_convert

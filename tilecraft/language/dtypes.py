"""TileLang's `tilelang.language.dtypes`: the dtype names (`T.int`, `T.uint`, `T.short`, ...), the
conversion tables programs import (`_TORCH_DTYPE_TO_STR`, `_STR_TO_TORCH_DTYPE`), `dtype` and
`get_torch_dtype`; and the one check that refuses a dtype tilecraft can name but not compute with.

A dtype here is tilecraft's interned `DType` (also a `str`, as TileLang's are): `T.int is T.int32`.
"""
from __future__ import annotations

from ..ir import dtype as _dt
from ..ir.dtype import DType

dtype = _dt.dtype
AnyDType = object

bool = _dt.bool_  # noqa: A001 - TileLang's names
short = _dt.int16
int = _dt.int32  # noqa: A001
uint = _dt.uint32
long = _dt.int64
half = _dt.float16
float = _dt.float32  # noqa: A001
double = _dt.float64
int4, int8, int16, int32, int64 = _dt.int4, _dt.int8, _dt.int16, _dt.int32, _dt.int64
uint8, uint16, uint32, uint64 = _dt.uint8, _dt.uint16, _dt.uint32, _dt.uint64
float16, bfloat16, float32, float64 = _dt.float16, _dt.bfloat16, _dt.float32, _dt.float64
tfloat32 = _dt.float32  # tf32 is float32 storage (see ir/dtype.py)
float8_e4m3fn, float8_e5m2, float8_e8m0fnu = _dt.float8_e4m3fn, _dt.float8_e5m2, _dt.float8_e8m0fnu
float8_e4m3 = _dt.float8_e4m3fn  # TileLang's CUDA backend prints both as the same e4m3 type
float4_e2m1fn = _dt.float4_e2m1fn
float4_e2m1_unpacked = _dt.float4_e2m1fn
float6_e2m3fn, float6_e3m2fn = _dt.float6_e2m3fn, _dt.float6_e3m2fn


def _torch_tables():
    import torch
    names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
             "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"]
    to_str = {getattr(torch, n): n for n in names if hasattr(torch, n)}
    return to_str, {v: k for k, v in to_str.items()}


def __getattr__(name):
    if name in ("_TORCH_DTYPE_TO_STR", "_STR_TO_TORCH_DTYPE"):
        to_str, to_torch = _torch_tables()
        return to_str if name == "_TORCH_DTYPE_TO_STR" else to_torch
    raise AttributeError(f"module 'tilelang.language.dtypes' (tilecraft) has no attribute {name!r}")


def get_tvm_dtype(value) -> DType:
    """Any dtype spelling (str, torch dtype, Python type) as the interned dtype."""
    return _dt.dtype(value)


def get_torch_dtype(value):
    """The torch dtype of any dtype spelling."""
    import torch
    if isinstance(value, torch.dtype):
        return value
    return _dt.to_torch(_dt.dtype(value))


def require_computable(d: DType, what: str) -> DType:
    """`d`, or a TilecraftError at the user's line when no target of tilecraft can store or compute
    with it (TileLang's sub-byte and MX scale formats)."""
    why = _dt.STORAGE_ONLY.get(d)
    if why is None:
        return d
    from .builder import active, caller_span, current_span
    from ..errors import TilecraftError
    raise TilecraftError(
        f"{what}: {d} ({why}) has no storage or arithmetic on tilecraft's targets (the CPU target, "
        f"CUDA sm_80 / sm_90a) yet", current_span() if active() else caller_span(),
        hint="hold the packed values in a uint8 / int8 tensor and unpack them with shifts and masks "
             "(see tilelang.quantize), or use float8_e4m3fn / int8")

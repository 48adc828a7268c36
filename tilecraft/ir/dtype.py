"""Scalar data types of the tile IR.

A `DType` is an interned, immutable description of one scalar element: its canonical name (the
spelling TileLang uses, e.g. ``"float16"``), its kind (float / int / uint / bool) and its width in
bits.  Every spelling a user may write (``"float"``, ``"half"``, ``T.float16``, a torch dtype) is
normalised through :func:`dtype` so the rest of the compiler compares dtypes by identity.
"""
from __future__ import annotations


class DType(str):
    """One scalar type; also the string of its name, as TileLang's dtypes are (programs write
    `getattr(torch, T.float16)`, `"float" in dtype`, `dtype.startswith("int")`).  Interned and
    immutable: equal to another DType only when it is the same object, and to a string when the
    string spells it (an alias included)."""

    def __new__(cls, name: str, kind: str, bits: int):
        self = super().__new__(cls, name)
        object.__setattr__(self, "kind", kind)   # "float", "int", "uint", "bool"
        object.__setattr__(self, "bits", bits)
        return self

    def __setattr__(self, key, value):
        raise AttributeError(f"DType({self.name}) is immutable")

    def __reduce__(self):  # copies and pickles come back as the interned object
        return (dtype, (self.name,))

    @property
    def name(self) -> str:
        return str.__str__(self)

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"DType({self.name})"

    # TileLang programs compare a dtype with a string: `if dtype == "float16"`, `dtype == "half"`.
    def __eq__(self, other):
        if isinstance(other, DType):
            return self is other
        if isinstance(other, str):
            try:
                return dtype(other) is self
            except ValueError:
                return False
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return str.__hash__(self)

    def as_torch(self):
        """The torch dtype (TileLang's `T.float16.as_torch()`)."""
        return to_torch(self)

    @property
    def itemsize(self) -> int:
        return self.bytes

    def __call__(self, value=None, span=None, is_size_var=False):
        """`T.float32(0)`, `T.int32(x)`: a constant of this dtype, or a cast of a kernel value.
        `n = T.int32()` (no value), as in TVM script: a fresh symbolic variable of this dtype, named
        after the assignment's target (usable as a `T.dynamic` size)."""
        from .expr import Var, cast, const
        if value is None:
            return Var(_assigned_name(), self)
        if isinstance(value, (bool, int, float, str)):
            return const(value, self, span)
        return cast(value, self, span)

    @property
    def storage_only(self) -> bool:
        """A dtype tilecraft can name but not compute with or store on any target yet."""
        return self in STORAGE_ONLY

    @property
    def packed(self) -> bool:
        """Narrower than a byte and stored packed (int4: two per byte, the element at an even flat
        index in the low nibble; TileLang's and the torch int8 tensor's layout)."""
        return self.bits < 8


float16 = DType("float16", "float", 16)
bfloat16 = DType("bfloat16", "float", 16)
float32 = DType("float32", "float", 32)
float64 = DType("float64", "float", 64)
float8_e4m3fn = DType("float8_e4m3fn", "float", 8)
float8_e5m2 = DType("float8_e5m2", "float", 8)
int8 = DType("int8", "int", 8)
int16 = DType("int16", "int", 16)
int32 = DType("int32", "int", 32)
int64 = DType("int64", "int", 64)
uint8 = DType("uint8", "uint", 8)
uint16 = DType("uint16", "uint", 16)
uint32 = DType("uint32", "uint", 32)
uint64 = DType("uint64", "uint", 64)
bool_ = DType("bool", "bool", 8)

# TileLang's sub-byte and scale formats.  int4 is stored packed, two per byte (ir/packed.py says how);
# the others are names here (annotations, comparisons, torch conversions): a kernel that stores or
# computes with one is refused at its line (`STORAGE_ONLY`).
int4 = DType("int4", "int", 4)                       # two per byte
float4_e2m1fn = DType("float4_e2m1fn", "float", 4)   # OCP MX FP4: two per byte
float8_e8m0fnu = DType("float8_e8m0fnu", "float", 8)  # OCP MX scale: 2^(bits - 127), 0xff NaN
float6_e2m3fn = DType("float6_e2m3fn", "float", 6)
float6_e3m2fn = DType("float6_e3m2fn", "float", 6)

ALL = [float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2, int8, int16, int32, int64,
       uint8, uint16, uint32, uint64, bool_, int4, float4_e2m1fn, float8_e8m0fnu, float6_e2m3fn, float6_e3m2fn]

STORAGE_ONLY = {
    float4_e2m1fn: "4-bit MX floats (two per byte; the block-scaled MMA that consumes them is sm_100's)",
    float8_e8m0fnu: "8-bit exponent-only MX scale factors (consumed by sm_100's block-scaled MMA)",
    float6_e2m3fn: "6-bit MX floats",
    float6_e3m2fn: "6-bit MX floats",
}

_ALIASES = {d.name: d for d in ALL}
_ALIASES.update({
    "float": float32, "half": float16, "fp16": float16, "bf16": bfloat16, "fp32": float32,
    "double": float64, "fp64": float64, "int": int32, "e4m3_float8": float8_e4m3fn,
    "e5m2_float8": float8_e5m2, "float8_e4m3": float8_e4m3fn,
    # TileLang's C-style names (tilelang.language.dtypes)
    "short": int16, "long": int64, "uint": uint32, "ulong": uint64,
    # tf32 is float32 storage; a gemm over float32 tiles already multiplies in tf32 on tensor cores
    "tfloat32": float32,
    # sm_100's 4-bit float hint for shared tiles: the same element type
    "float4_e2m1_unpacked": float4_e2m1fn,
})


def _no_pending_name():
    return None


_pending_name = _no_pending_name


def use_pending_name(source) -> None:
    """Where `_assigned_name` asks first for the name being assigned: `source()` -> the target of the
    assignment the front end is parsing, or None (language/builder.py installs its parser's; this
    module reads no front end)."""
    global _pending_name
    _pending_name = source


def _assigned_name() -> str:
    """The target of `n = T.int32()` at the caller's line (the parser's pending name inside a
    kernel body), else "v"."""
    import linecache
    import re
    import sys
    name = _pending_name()
    if name:
        return name
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(__file__.rsplit("/ir/", 1)[0]):
        f = f.f_back
    if f is not None:
        m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]*)?=", linecache.getline(f.f_code.co_filename, f.f_lineno))
        if m:
            return m.group(1)
    return "v"


def dtype(value) -> DType:
    """Normalise any accepted dtype spelling (str, DType, torch.dtype) to the interned DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        d = _ALIASES.get(value)
        if d is None:
            raise unknown_dtype(value)
        return d
    torch_name = getattr(value, "__module__", None) == "torch" and str(value).replace("torch.", "")
    if torch_name:
        return dtype(torch_name)
    if value is bool:
        return bool_
    if value is int:
        return int32
    if value is float:
        return float32
    from ..errors import UnknownDTypeError
    raise UnknownDTypeError(f"cannot use {value!r} as a dtype",
                            hint=f"use a dtype name such as \"float16\" or T.float16")


def unknown_dtype(value):
    """The error for an unknown dtype spelling, with a did-you-mean over the accepted names."""
    import difflib

    from ..errors import UnknownDTypeError  # lazy: errors imports the ir package
    close = difflib.get_close_matches(value, list(_ALIASES), 1, 0.6) if isinstance(value, str) else []
    hint = (f"did you mean {close[0]!r}? " if close else "") + \
        f"dtypes are {', '.join(d.name for d in ALL)} (or an alias: {', '.join(n for n in _ALIASES if _ALIASES[n].name != n)})"
    return UnknownDTypeError(f"unknown dtype {value!r}", hint=hint)


def to_torch(d: DType):
    import torch
    return {"bool": torch.bool, "float8_e4m3fn": getattr(torch, "float8_e4m3fn", None),
            "float8_e5m2": getattr(torch, "float8_e5m2", None)}.get(d.name) or getattr(torch, d.name)


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary arithmetic op on two typed operands (TileLang's rules): floats win
    over ints, and within a kind the wider type wins."""
    if a is b:
        return a
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    # Same width, different kinds (float16 vs bfloat16, int vs uint): TileLang requires a cast;
    # compute in float32 / the signed type so no precision is silently lost.
    if a.is_float:
        return float32
    return a if a.kind == "int" else b

"""C identifiers for IR names: one unique, legal identifier per variable or buffer, by identity.

IR names are what the user wrote (`k`, `A_shared`), what a pass made up (`i3`, `acc2`) or what a
symbol is called (`T.dynamic("k")`).  Nothing makes them unique across those sources, and a user
may pick a C++ keyword (`int`), a CUDA built-in (`threadIdx`) or one of our own names (`tc_tid`).
Printing them as they are once turned a pipelined loop over `T.dynamic("k")` into
`for (int k = 0; k < (k + 31) / 32; ++k)`, a silent wrong answer.  So the printers never print
`node.name`: they ask a `CNames` for the node's identifier, which is

- the IR name when it is free and legal,
- otherwise the name with a suffix (`k_1`), or with a prefix when it is not legal on its own
  (`v_int`, `v_tc_tid`); Unicode letters are spelled out (`caf_u00e9`).

Identifiers that start with `tc_` belong to the code generator and the header library (the
flat thread index, shared-memory base, grid counters, ...): no IR node gets one, except the
`BuiltinVar`s that stand for exactly those names.  Two different nodes never share an
identifier, whatever their IR names; the same node always gets the same one.
"""
from __future__ import annotations

import re

from ..ir.expr import BuiltinVar

RESERVED_PREFIX = "tc_"

# C++20 keywords and alternative tokens, CUDA built-ins and qualifiers, names the generated code or
# the header library use unqualified (std, tc, min, max, fixed-width integer types, ...).
_CXX_KEYWORDS = """
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq
nullptr operator or or_eq private protected public register reinterpret_cast requires return
short signed sizeof static static_assert static_cast struct switch template this thread_local
throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
xor xor_eq restrict final override import module
"""
_TARGET_NAMES = """
threadIdx blockIdx blockDim gridDim warpSize clusterDim clusterIdx main printf assert std tc
min max abs size_t ptrdiff_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t
half half2 nv_bfloat16 nv_bfloat162 float2 float4 int2 int4 uint2 uint4 dim3 NULL errno
"""
RESERVED = frozenset(_CXX_KEYWORDS.split()) | frozenset(_TARGET_NAMES.split())

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _legal(name: str) -> str:
    """`name` spelled with ASCII letters, digits and underscores, not starting with a digit."""
    out = "".join(c if (c.isascii() and (c.isalnum() or c == "_")) else f"_u{ord(c):04x}" for c in name)
    if not out or not _IDENT.match(out):
        out = "v_" + out
    return out


def _needs_prefix(name: str) -> bool:
    return (name in RESERVED or name.startswith(RESERVED_PREFIX) or name.startswith("__")
            or (name[:1] == "_" and name[1:2].isupper()))


class CNames:
    """Hands out identifiers: `names(node)` for a Var or Buffer, `names.fresh(base)` for a
    printer-made temporary that belongs to no node."""

    def __init__(self):
        self._of: dict = {}
        self._taken: set = set()

    def __call__(self, node) -> str:
        got = self._of.get(node)
        if got is not None:
            return got
        if isinstance(node, BuiltinVar):
            name = node.name        # declared by the printer itself under exactly this name
        else:
            name = self._unique(node.name)
        self._of[node] = name
        return name

    def fresh(self, base: str) -> str:
        return self._unique(base)

    def _unique(self, raw: str) -> str:
        base = _legal(raw)
        if _needs_prefix(base):
            base = "v_" + base
        name, n = base, 0
        while name in self._taken:
            n += 1
            name = f"{base}_{n}"
        self._taken.add(name)
        return name

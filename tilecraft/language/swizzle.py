"""TileLang's named shared-memory swizzles as `Layout` objects (`tilelang.layout`):
`make_quarter_bank_swizzled_layout` (32-byte), `make_half_bank_swizzled_layout` (64-byte) and
`make_full_bank_swizzled_layout` (128-byte) over a (rows, cols) tile of `element_size`-bit elements.

A swizzle atom is a row of 2, 4 or 8 sixteen-byte chunks; the chunk index of element (i, j) is
XORed with row bits, so the 8 rows that share a bank group spread over distinct banks:
chunk' = chunk ^ ((i // (8 // c)) % c) for an atom of c chunks (CUTLASS's Swizzle<log2 c, 4, 3>
on byte offsets).  Columns wider than one atom repeat it.  As with any `T.annotate_layout` value,
tilecraft keeps its own shared-memory placement (see layout.py); these objects are for inspecting
and drawing (`tilelang.tools.plot_layout`)."""
from __future__ import annotations

from .layout import Layout


def _swizzled(rows: int, cols: int, element_size: int, chunks: int, what: str) -> Layout:
    if element_size not in (8, 16, 32, 64):
        raise ValueError(f"{what}: element_size is the element's width in bits (8, 16, 32 or 64), got {element_size}")
    vec = 128 // element_size            # elements per 16-byte chunk
    atom = vec * chunks                  # elements per atom row
    if cols % atom:
        raise ValueError(f"{what}: {cols} columns of {element_size}-bit elements are not a whole number of "
                         f"{chunks * 16}-byte swizzle rows ({atom} elements)")
    shift = 8 // chunks

    def forward(i, j):
        chunk = (j % atom) // vec
        return [i, (j // atom) * atom + (chunk ^ ((i // shift) % chunks)) * vec + j % vec]

    return Layout([rows, cols], forward)


def make_quarter_bank_swizzled_layout(rows: int, cols: int, element_size: int = 16) -> Layout:
    return _swizzled(rows, cols, element_size, 2, "make_quarter_bank_swizzled_layout")


def make_half_bank_swizzled_layout(rows: int, cols: int, element_size: int = 16) -> Layout:
    return _swizzled(rows, cols, element_size, 4, "make_half_bank_swizzled_layout")


def make_full_bank_swizzled_layout(rows: int, cols: int, element_size: int = 16) -> Layout:
    return _swizzled(rows, cols, element_size, 8, "make_full_bank_swizzled_layout")

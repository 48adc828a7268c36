"""torch helpers the fuzzer's generated reference functions call (kept tiny and obvious: a
saved regression test imports them, so their meaning must not drift).

The tile semantics they mirror (SPEC section 3): a tile read that reaches past a tensor's edge
is zero-filled; a tile write never lands outside its tensor.
"""
from __future__ import annotations

import functools

import torch

ACC = {torch.float16: torch.float32, torch.bfloat16: torch.float32}


def pad(x, bm: int, bn: int):
    """`x` (2-D) zero-padded up to whole (bm, bn) tiles."""
    m, n = x.shape
    mp, np_ = -(-m // bm) * bm, -(-n // bn) * bn
    out = torch.zeros((mp, np_), dtype=x.dtype)
    out[:m, :n] = x
    return out


def pad1(x, b: int):
    n = x.shape[0]
    out = torch.zeros((-(-n // b) * b,), dtype=x.dtype)
    out[:n] = x
    return out


def tiles(x, bm: int, bn: int):
    """Padded `x` as (row tiles, bm, col tiles, bn)."""
    p = pad(x, bm, bn)
    return p.reshape(p.shape[0] // bm, bm, p.shape[1] // bn, bn)


def acc_dtype(d):
    """The reduce / cumsum accumulator dtype (ir/semantics.py: scan_accumulator_dtype)."""
    return ACC.get(d, d)


def reduce(kind: str, x, dim: int):
    if kind == "sum":
        return x.sum(dim)
    if kind == "abssum":
        return x.abs().sum(dim)
    if kind == "max":
        return x.amax(dim)
    if kind == "min":
        return x.amin(dim)
    if kind == "absmax":
        return x.abs().amax(dim)
    if kind in _BITWISE:
        return functools.reduce(_BITWISE[kind], x.unbind(dim))
    raise ValueError(kind)


_BITWISE = {"bitand": torch.bitwise_and, "bitor": torch.bitwise_or, "bitxor": torch.bitwise_xor}


def combine(kind: str, acc, v):
    if kind in _BITWISE:
        return _BITWISE[kind](acc, v)
    if kind in ("sum", "abssum"):
        return acc + v
    if kind in ("max", "absmax"):
        return torch.maximum(acc, v)
    return torch.minimum(acc, v)


def index_grids(mp: int, np_: int, bm: int, bn: int):
    """Tile-local row / column indices and global row / column indices over a padded (mp, np_)
    space, as int32 tensors of that shape."""
    gi = torch.arange(mp, dtype=torch.int32)[:, None].expand(mp, np_)
    gj = torch.arange(np_, dtype=torch.int32)[None, :].expand(mp, np_)
    return gi % bm, gj % bn, gi, gj


def rand(shape, dtype, g: torch.Generator):
    """Fresh random data: normal floats, small integers (never zeros)."""
    if dtype == torch.int32:
        return torch.randint(-8, 9, shape, generator=g, dtype=torch.int32)
    return torch.randn(shape, generator=g).to(dtype)

"""Integer helpers for kernel factories (`tilelang.math`, also `tilelang.cdiv`)."""
from __future__ import annotations

__all__ = ["cdiv", "next_power_of_2", "prev_power_of_2", "align_up"]


def _int(x, what):
    if isinstance(x, bool) or not isinstance(x, int):
        try:
            import operator
            return operator.index(x)
        except TypeError:
            raise TypeError(f"{what} expects integers, got {x!r}") from None
    return x


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for integers (b != 0)."""
    a, b = _int(a, "cdiv"), _int(b, "cdiv")
    return -(-a // b)


def next_power_of_2(x: int) -> int:
    """The smallest power of two >= x (1 for x <= 1)."""
    x = _int(x, "next_power_of_2")
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def prev_power_of_2(x: int) -> int:
    """The largest power of two <= x (x >= 1)."""
    x = _int(x, "prev_power_of_2")
    if x < 1:
        raise ValueError(f"prev_power_of_2 expects x >= 1, got {x}")
    return 1 << (x.bit_length() - 1)


def align_up(x: int, alignment: int) -> int:
    return cdiv(x, alignment) * alignment

"""The register layout of a reshaped fragment (`T.reshape(frag, shape)` / `T.view(frag, shape)`).

TileLang's reshape of a fragment names the same registers with another shape: element `v[idx]` of
the view is element `base[unravel(ravel(idx))]` of its base, row-major on both sides, and every
(thread, register slot) keeps the element it holds.  In digits (fragment.py) the base's flat index
is a linear combination of its digits; the view's coordinate k is `(flat // stride_k) % shape_k`,
linear in the digits once no digit straddles a boundary `stride_k` of the view's row-major strides.
A digit that does (coefficient c < B < c * extent, B a stride) is split in two, low part first, so
the thread index and the register slot are the same numbers in base and view: the view reads and
writes the base's register array slot for slot.  The result is checked element by element against
the base; a layout that cannot be expressed this way (a padded layout, a digit whose coefficient
does not divide a stride) gives None, and the caller refuses the reshape at the user's line.
"""
from __future__ import annotations

from .fragment import Digit, FragmentLayout, _placement


def _strides(shape) -> list:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return list(reversed(out))


def _split(digits: tuple, coef: dict, bounds) -> tuple | None:
    """`digits` with every digit straddling one of `bounds` split at it (names `<name>.<k>`), and the
    flat coefficient of each resulting digit filled into `coef`; None when a split is not exact."""
    out = []
    for d in digits:
        parts = [(d.name, d.extent, coef.get(d.name, 0))]
        done = []
        while parts:
            name, ext, c = parts.pop(0)
            cut = next((b for b in bounds if c and c < b < c * ext), None)
            if cut is None:
                done.append((name, ext, c))
                continue
            if cut % c or ext % (cut // c):
                return None
            lo = cut // c
            parts[:0] = [(f"{name}.{len(done) + len(parts)}a", lo, c), (f"{name}.{len(done) + len(parts)}b",
                                                                         ext // lo, cut)]
        out += done
    for name, _, c in out:
        coef[name] = c
    return tuple(Digit(n, e) for n, e, _ in out)


def reshape_layout(lay: FragmentLayout, shape) -> FragmentLayout | None:
    """The layout of `lay`'s registers seen as a row-major tile of `shape` (same element count), or
    None when the element placement cannot be written with (split) digits."""
    shape = tuple(shape)
    n = 1
    for s in shape:
        n *= s
    base_n = 1
    for s in lay.shape:
        base_n *= s
    if n != base_n or lay.padded_dims():
        return None
    if shape == tuple(lay.shape):
        return lay
    coef: dict = {}
    for dim, stride in enumerate(_strides(lay.shape)):
        for name, c in lay.coords[dim]:
            coef[name] = coef.get(name, 0) + c * stride
    strides = _strides(shape)
    bounds = sorted(set(strides[:-1]) | {n}) if len(shape) > 1 else [n]
    tdigits = _split(lay.thread_digits, coef, bounds)
    rdigits = _split(lay.reg_digits, coef, bounds)
    if tdigits is None or rdigits is None:
        return None
    coords = [[] for _ in shape]
    for d in tdigits + rdigits:
        c = coef.get(d.name, 0)
        if not c or d.extent == 1:
            continue
        k = next(k for k, st in enumerate(strides) if c >= st)   # the dimension the digit lies in
        if c % strides[k]:
            return None
        coords[k].append((d.name, c // strides[k]))
    out = FragmentLayout(shape, lay.threads, tdigits, rdigits, tuple(tuple(c) for c in coords))
    if out.num_regs != lay.num_regs or out.padded_dims():
        return None
    base_strides = _strides(lay.shape)
    want = []
    for c in _placement(lay):
        flat = sum(x * s for x, s in zip(c, base_strides))
        want.append(tuple((flat // st) % ext for st, ext in zip(strides, shape)))
    return out if tuple(want) == _placement(out) else None


def fragment_views(body) -> dict:
    """view Buffer -> its `View` statement, for every reshaped register fragment in `body` (a view
    of a view names the first one's base: language/views.py)."""
    from ..functor import collect
    from ..stmt import View
    return {v.buffer: v for v in collect(body, lambda n: isinstance(n, View) and n.buffer.scope == "fragment")}

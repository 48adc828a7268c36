"""The values read outside a tensor: `T.annotate_safe_value` and `T.annotate_padding`.

TileLang's meaning: an element read past the edge of a global tensor is 0, or the tensor's *safe
value* (`T.annotate_safe_value({A: v})`); an element of a shared / register tile filled from
outside its source tensor is 0, or the tile's *padding* (`T.annotate_padding({S: v})`, which wins
over the source's safe value for that fill).  The annotations are `Annotate` statements in the
kernel body (language/annotations.py), applied where out-of-range reads are guarded:

- transform/legalize_global_access.py (every target): a guarded load reads `in ? A[i] : safe(A)`,
  and a store into a padded tile stores `all loads in ? value : padding(S)`;
- the CUDA copy paths that fill out-of-range elements with zeros in hardware (cp.async and vector
  loads with zero fill, TMA) are not taken for a copy whose fill value is not zero: such a copy
  moves element by element (cuda_ops/copy.py) and is not planned as TMA (pipeline_copies.py), so
  the guarded loads above give the value.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .expr import Const
from .stmt import Annotate

SAFE_VALUE = "safe_value"
PADDING = "padding"


@dataclass(frozen=True)
class OutOfBounds:
    safe: dict = field(default_factory=dict)      # global Buffer -> Expr (in its dtype)
    padding: dict = field(default_factory=dict)   # shared / fragment / local Buffer -> Expr

    def read_value(self, buf):
        """What a read of `buf` past its edge gives (None: zero)."""
        return self.safe.get(buf)

    def fill_value(self, dst, src):
        """What an element of `dst` filled from outside `src` gets (None: zero)."""
        return self.padding.get(dst, self.safe.get(src))

    def zero_fill_ok(self, dst, src) -> bool:
        """Whether hardware zero fill (cp.async zfill, vector zfill loads, TMA) gives the right
        out-of-range value for a copy of `src` into `dst`."""
        v = self.fill_value(dst, src)
        return v is None or (isinstance(v, Const) and v.value == 0 and not str(v.value).startswith("-"))


def out_of_bounds(body) -> OutOfBounds:
    """The safe values and paddings annotated anywhere in `body`."""
    from .functor import collect
    safe, padding = {}, {}
    for a in collect(body, lambda n: isinstance(n, Annotate) and n.key in (SAFE_VALUE, PADDING)):
        buf, value = a.value
        (safe if a.key == SAFE_VALUE else padding)[buf] = value
    return OutOfBounds(safe, padding)

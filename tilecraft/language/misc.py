"""Small TVM-script names TileLang programs use: `T.Var(name, dtype)` (a symbolic variable, e.g. a
tensor size bound at call time), `T.align_up(x, a)`, and `T.Ramp` / `T.Broadcast` (TVM's vector
expressions), which tilecraft's scalar IR does not have: they are refused at their line with the
scalar spelling to use."""
from __future__ import annotations

from ..ir import Var as _Var
from ..ir import dtype as dt
from .builder import caller_span, current_span
from .math import ceildiv


def Var(name: str = "v", dtype="int32", span=None):  # noqa: N802 - TVM's spelling
    """A fresh symbolic variable (usable as a `T.Tensor` size, bound from the argument's shape)."""
    return _Var(str(name), dt.dtype(dtype))


def align_up(x, alignment):
    """The smallest multiple of `alignment` that is >= x."""
    return ceildiv(x, alignment) * alignment


def _vector(name, spelled):
    def construct(*args, **kwargs):
        from ..errors import TilecraftError
        raise TilecraftError(
            f"T.{name}(...) builds a TVM vector expression; tilecraft's IR is scalar (vector loads and stores "
            f"are chosen by the compiler)", current_span() or caller_span(), hint=spelled)
    construct.__name__ = name
    return construct


Ramp = _vector("Ramp", "write the lanes as a loop: `for v in T.vectorized(lanes): A[base + v * stride] = ...`")
Broadcast = _vector("Broadcast", "use the scalar itself: in `for v in T.vectorized(lanes)` every lane reads it")

"""`T.const` and `T.empty`: the names of TileLang's eager jit style (tilecraft/jit_eager.py).

    @tilelang.jit
    def matmul(A, B, block_M: int = 128):
        M, N, K = T.const("M, N, K")      # shape names, bound from the call's tensors (or .compile(M=...))
        A: T.Tensor((M, K), T.float16)
        B: T.Tensor((K, N), T.float16)
        C = T.empty((M, N), T.float16)    # an output: allocated by the call and returned
        ...
        return C

Both only mean something while the eager jit runs the statements before the kernel (an
`EagerScope` is active): the jit runs them twice per compile-time argument set — once with every
`T.const` a symbol, to learn which tensor dimension binds it, then, per distinct set of bound
values, with the values themselves (ints), so everything derived from them folds at compile time.
"""
from __future__ import annotations

import contextvars
import re
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..errors import TilecraftError
from ..ir import Var
from ..ir import dtype as dt
from .builder import caller_span

_SCOPE: contextvars.ContextVar = contextvars.ContextVar("tilecraft_eager_scope", default=None)


@dataclass
class EagerScope:
    """One run of an eager function's statements: `values` is None while probing (each T.const is a
    symbol), else the ints the consts are bound to."""
    values: dict | None = None
    sentinel: bool = False  # probing with each T.const a distinct large int instead of a symbol
    consts: dict = field(default_factory=dict)     # name -> Var / sentinel int (probe) or int (bound), in order
    outputs: list = field(default_factory=list)    # OutputSpec, creation order

    @property
    def probing(self) -> bool:
        return self.values is None


@contextmanager
def eager_scope(scope: EagerScope):
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def _active(what: str) -> EagerScope:
    scope = _SCOPE.get()
    if scope is None:
        raise TilecraftError(f"{what} can only be used in the body of a @tilelang.jit function (the eager style), "
                             f"before its `with T.Kernel(...)`", caller_span(),
                             hint="in a @T.prim_func, sizes are Python values or T.dynamic(...) symbols, and "
                                  "outputs are parameters (out_idx=... allocates them)")
    return scope


def probing() -> bool:
    """Whether an eager function's statements are being run with its T.consts as symbols."""
    scope = _SCOPE.get()
    return scope is not None and scope.probing


def shape_entry_ok(s) -> bool:
    """A tensor size: a non-negative int or a symbol; in an eager function also an expression (of the
    T.consts while probing: `M // block_M`; of T.dynamic symbols: `seq_len * heads`)."""
    from ..ir import Expr
    if isinstance(s, bool):
        return False
    if isinstance(s, int):
        return s >= 0
    # within an eager function, any expression: the jit turns affine ones of T.dynamic symbols into
    # sizes it checks at each call (jit_eager_args.AffineDims) and refuses the rest
    return isinstance(s, Var) or (_SCOPE.get() is not None and isinstance(s, Expr))


# Stand-ins for the T.consts when the statements before the kernel need ints (`range(M)`, `if M > 64`):
# primes near 2**20 apart, so a tensor size equal to one of them is that name, not an expression.
_SENTINELS = (1048573, 1048583, 1048589, 1048601, 1048609, 1048613, 1048627, 1048633, 1048661, 1048681,
              1048703, 1048709, 1048717, 1048721, 1048759, 1048783, 1048793, 1048799, 1048807, 1048829)


def split_names(names: str) -> list:
    """`"M, N, K"` / `"M N K"` / `"M"` -> the names (TileLang's spelling of several at once)."""
    return [n for n in re.split(r"[,\s]+", names.strip()) if n]


def const(names: str, dtype="int32"):
    """Shape names of an eager jit function, bound from the call's tensors' shapes (or given
    explicitly: `f.compile(M=1024)`); several names at once return a tuple."""
    scope = _active("T.const")
    if not isinstance(names, str):
        raise TilecraftError(f"T.const takes the names as one string (\"M, N, K\"), got {names!r}", caller_span())
    parts = split_names(names)
    if not parts:
        raise TilecraftError("T.const(\"\"): no name given", caller_span())
    d = dt.dtype(dtype)
    if not d.is_int:
        raise TilecraftError(f"T.const({names!r}, {d}): a shape name is an integer (int32 or int64)", caller_span())
    out = []
    for n in parts:
        if scope.probing:
            v = scope.consts.get(n)
            if v is None:
                v = scope.consts[n] = _SENTINELS[len(scope.consts)] if scope.sentinel else Var(n, d)
        else:
            v = scope.values[n]
            scope.consts[n] = v
        out.append(v)
    return out[0] if len(out) == 1 else tuple(out)


class OutputSpec:
    """`T.empty(shape, dtype)`: an output tensor of an eager jit function, allocated by the call
    (on the inputs' device) and returned; the function returns it (`return C` / `return C, D`)."""

    def __init__(self, shape, dtype, span):
        if isinstance(shape, (int, Var)):
            shape = (shape,)
        self.shape = tuple(shape)
        self.dtype = dtype
        self.span = span
        self.name = None  # the variable it is bound to (set by the jit)

    def __repr__(self):
        return f"T.empty({self.shape}, {self.dtype})"


def empty(shape, dtype="float32"):
    scope = _active("T.empty")
    span = caller_span()
    try:
        d = dt.dtype(dtype)
    except TilecraftError as e:
        raise TilecraftError(f"T.empty: {e.message}", span, hint=e.hint) from None
    if isinstance(shape, (int, Var)):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise TilecraftError(f"T.empty: the shape must be a tuple or list of sizes, got {shape!r}", span) from None
    for s in shape:
        if not shape_entry_ok(s):
            raise TilecraftError(f"T.empty{shape}: each size must be a non-negative int, a T.const or a "
                                 f"T.dynamic symbol, got {s!r}", span)
    out = OutputSpec(shape, d, span)
    scope.outputs.append(out)
    return out

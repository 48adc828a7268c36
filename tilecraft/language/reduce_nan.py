"""`T.reduce_max / reduce_min / reduce_absmax(..., nan_propagate=True)` on float16 / bfloat16 tiles:
TileLang's meaning is that a NaN in a reduced row makes that row's result NaN (CUDA's __hmax_nan),
where the default combine returns the other operand (__hmax).  TileLang applies the option to 16-bit
floats only (float32 reductions use fmaxf either way), and so does this.

Built from ordinary tile IR after the reduction: a flag tile of the source's shape and dtype, NaN
where the source is NaN and 0 elsewhere, summed into the result (`clear=False`): a row with a NaN
becomes NaN, any other row gains exactly 0.  The flag tile has the source's dtype and shape, so its
register layout is inferred like the source's and the sum lands in the result's own layout."""
from __future__ import annotations

from ..ir import Buffer, For, Load, Reduce, Store, Var, call, const, select
from ..ir import dtype as dt
from .builder import error


def _nest(b, shape, body_of):
    vars_ = [Var(b.fresh_name(f"nan_i{k}")) for k in range(len(shape))]
    loop = body_of(tuple(vars_))
    for v, n in reversed(list(zip(vars_, shape))):
        loop = For(v, const(0), const(n), "parallel", loop, 1, (), span=b.span)
    return loop


def emit(b, kind: str, src: Buffer, dst: Buffer, dim: int, clear: bool) -> None:
    """The statements after `Reduce(kind, src, dst, dim)` (emitted by the caller)."""
    if src.dtype not in (dt.float16, dt.bfloat16):
        return  # TileLang: only 16-bit floats have a NaN-ignoring combine to switch
    if not clear:
        raise error(f"T.reduce_{kind}(..., clear=False, nan_propagate=True) is not supported by tilecraft yet: "
                    f"the NaN of an earlier {dst.name} would not be kept",
                    hint="reduce into a fresh tile with clear=True and combine it with T.max / T.min")
    from .sparse import _hoisted_alloc
    flag = Buffer(b.fresh_name(f"{src.name}_nan"), src.shape, src.dtype, src.scope, span=b.span)
    _hoisted_alloc(b, flag)
    b.emit(_nest(b, src.shape, lambda idx: Store(
        flag, idx, select(call("isnan", Load(src, idx)), const(float("nan"), src.dtype), const(0.0, src.dtype)),
        span=b.span)))
    b.emit(Reduce("sum", flag, dst, dim, False, span=b.span))

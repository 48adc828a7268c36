"""The reference semantics both lowerings share (CPU and CUDA), in one neutral place.

The CPU lowering (`transform/lower_tile_ops_cpu.py`) is the executable reference; the CUDA
lowering (`transform/lower_cuda.py`, `transform/cuda_ops/`) must compute the same values.  The
rules below are the ones where the two used to carry their own copies, which is where a
mismatch between targets is born:

- the dtype an operation accumulates in (`gemm_accumulator_dtype`, `scan_accumulator_dtype`);
- the identity and the combiner of each reduction kind (`reduce_identity`, `reduce_combine`,
  `reduce_base_kind`);
- how a tile index maps to buffer indices inside a copy/atomic region (`region_indices`), and
  which dimensions a copy of a fragment slice `src[k, :]` takes whole (`slice_dims`);
- which buffer access anchors a `T.Parallel` nest (`loop_dims`, `parallel_anchor`): its
  indices are exactly the loop variables, each once, so the loop's iteration space is that
  buffer's element space; and which other accesses the nest may make with uniform indices
  (`mixed_dims`: the same element in every thread, e.g. a serial loop variable); and, when no
  access covers the nest, the row vector that anchors it instead (`partial_anchor`);
- fresh loop variables for whole-tile loops (`FreshVars`).

Neither lowering imports the other's private helpers; both import this module.
"""
from __future__ import annotations

import math

from . import dtype as dt
from .expr import Var, binary, call, cast, const, unary
from .node import same, same_seq


# ---- accumulator dtypes --------------------------------------------------------------------------

def gemm_accumulator_dtype(c_dtype):
    """`T.gemm` accumulates in float64 for a float64 C, float32 for any other float C (16-bit
    products are summed in float32, then rounded once per store), and in C's own dtype otherwise."""
    if c_dtype is dt.float64:
        return dt.float64
    return dt.float32 if c_dtype.is_float else c_dtype


def scan_accumulator_dtype(src_dtype):
    """`T.reduce_*` and `T.cumsum` accumulate 16-bit floats in float32, everything else in the
    source dtype (int32 sums wrap as in C; float32 and float64 stay as they are)."""
    return dt.float32 if src_dtype.is_float and src_dtype.bits < 32 else src_dtype


# ---- reductions ----------------------------------------------------------------------------------

REDUCE_KINDS = ("sum", "abssum", "max", "min", "absmax", "bitand", "bitor", "bitxor")
BIT_REDUCE_OPS = {"bitand": "&", "bitor": "|", "bitxor": "^"}   # integer tiles only


def has_infinity(d) -> bool:
    """Whether dtype `d` has an infinity (floats but float8_e4m3fn)."""
    return d.is_float and d.name != "float8_e4m3fn"


def max_value(dtype):
    """The largest value of `dtype` (T.max_value)."""
    d = dt.dtype(dtype)
    if d.is_float:
        big = {16: 65504.0 if d.name == "float16" else 3.3895313892515355e38, 32: 3.4028234663852886e38,
               64: 1.7976931348623157e308, 8: 448.0 if "e4m3" in d.name else 57344.0}[d.bits]
        return const(big, d)
    if d.is_bool:
        return const(True, d)
    bits = d.bits - (1 if d.kind == "int" else 0)
    return const((1 << bits) - 1, d)


def min_value(dtype):
    """The smallest value of `dtype` (T.min_value)."""
    d = dt.dtype(dtype)
    if d.is_float:
        return const(-max_value(d).value, d)
    if d.is_bool or d.kind == "uint":
        return const(0, d)
    return const(-(1 << (d.bits - 1)), d)


def reduce_base_kind(kind: str) -> str:
    """The combiner once |x| has been taken: abssum folds like sum, absmax like max."""
    return {"abssum": "sum", "absmax": "max"}.get(kind, kind)


def reduce_identity(kind: str, d):
    """The value a reduction starts from (and what padding contributes): 0 for the sums, absmax (|x| >= 0),
    bitor and bitxor; all bits set for bitand; -inf / the smallest value for max, +inf / the largest for min."""
    if kind in ("sum", "abssum", "absmax", "bitor", "bitxor"):
        return cast(0, d)
    if kind == "bitand":
        return unary("bitnot", cast(0, d))
    if kind == "max":
        return -const(float("inf"), d) if has_infinity(d) else min_value(d)
    return const(float("inf"), d) if has_infinity(d) else max_value(d)


def reduce_combine(kind: str, acc, v):
    """`acc` combined with one element `v` (|v| first for abssum / absmax)."""
    if kind in BIT_REDUCE_OPS:
        return binary(BIT_REDUCE_OPS[kind], acc, v)
    if kind in ("abssum", "absmax"):
        v = call("abs", v)
    if kind in ("sum", "abssum"):
        return binary("+", acc, v)
    return binary("max" if kind in ("max", "absmax") else "min", acc, v)


# ---- regions -------------------------------------------------------------------------------------

def shared_row_stride(region) -> int | None:
    """The stored row length (elements) of a 2-D gemm operand read from a shared tile, as the
    tensor-core header addresses it: rows along the region's outer non-unit dimension, elements
    contiguous along its inner one, which must be the buffer's last.  A whole-width operand's row
    length is its own; a column slice of a wider tile (`Q_shared[:, 512:576]`) has its parent's
    stride, and must start on a 128-byte boundary at a row that is a multiple of 8 (known here), so
    that ldmatrix addresses and the XOR swizzle line up -- a constant, or an expression provably a
    multiple (`Q_shared[:, j * 64:(j + 1) * 64]` over a loop variable j).  None: not addressable
    that way."""
    from .analysis import divisible
    dims = [d for d, e in enumerate(region.extents) if not same(e, 1)]
    shape = region.buffer.shape
    if len(dims) != 2 or dims[1] != len(shape) - 1:
        return None
    d0, d1 = dims
    stride = 1
    for e in shape[d0 + 1:]:
        if not isinstance(e, int):
            return None
        stride *= e
    if stride == region.extents[d1]:
        return stride
    c0, r0 = region.starts[d1], region.starts[d0]
    nbytes = region.buffer.dtype.bytes
    if (stride * nbytes) % 16 or not (divisible(c0, 128 // math.gcd(128, nbytes)) and divisible(r0, 8)):
        return None
    return stride


def region_indices(region, tile_idx) -> tuple:
    """Full buffer indices of the element at `tile_idx` of `region`; `tile_idx` indexes the
    region's non-unit extents only (a unit extent stays at its start: `A[i, j:j+n]` is 1-D)."""
    it = iter(tile_idx)
    out = []
    for start, ext in zip(region.starts, region.extents):
        out.append(start if ext == 1 else binary("+", start, next(it)))
    return tuple(out)


# ---- T.Parallel nests ----------------------------------------------------------------------------

def loop_dims(indices, loop_vars) -> tuple | None:
    """Which loop variable (by position) indexes each dimension, when each index is exactly a
    loop variable; None when some index is any other expression."""
    dims = []
    for idx in indices:
        hit = [k for k, v in enumerate(loop_vars) if idx is v]
        if not hit:
            return None
        dims.append(hit[0])
    return tuple(dims)


def mixed_dims(indices, loop_vars) -> tuple | None:
    """Like `loop_dims`, but a dimension may also be indexed by a *uniform* expression: one that
    names no loop variable of the nest, no thread index and no fragment element (a serial loop
    variable, a block index, a constant), so every thread means the same element there.  Such a
    dimension maps to None; an index that mixes loop variables into an expression makes the
    whole answer None.  `lse[k, j]` inside `for j in T.Parallel(N)` within `for k in T.serial(S)`
    gives (None, 0)."""
    from .expr import BuiltinVar, Load
    from .functor import collect
    lv = {id(v) for v in loop_vars}
    dims = []
    for idx in indices:
        hit = [k for k, v in enumerate(loop_vars) if idx is v]
        if hit:
            dims.append(hit[0])
            continue
        bad = collect(idx, lambda n: id(n) in lv or isinstance(n, BuiltinVar) or
                      (isinstance(n, Load) and n.buffer.scope == "fragment"))
        if bad:
            return None
        dims.append(None)
    return tuple(dims)


def window_dims(indices, loop_vars) -> tuple | None:
    """Like `mixed_dims`, but a dimension may also be a *window*: `u * c + v` (or `v + u * c`,
    `c * u + v`) with `v` a loop variable, `c` a positive constant and `u` uniform, which this
    returns as (loop position of v, u, c).  `x[i, jj * 4 + j]` inside `for i, j in T.Parallel(M, 4)`
    within `for jj in T.serial(N // 4)` gives (0, (1, jj, 4)).  None unless some dimension is a
    window and every other one is a loop variable or uniform."""
    from .expr import Binary, Const
    found, dims = False, []
    for idx in indices:
        d = mixed_dims((idx,), loop_vars)
        if d is not None:
            dims.append(d[0])
            continue
        if not (isinstance(idx, Binary) and idx.op == "+"):
            return None
        for v, prod in ((idx.a, idx.b), (idx.b, idx.a)):
            k = [p for p, lv in enumerate(loop_vars) if v is lv]
            if not k or not (isinstance(prod, Binary) and prod.op == "*"):
                continue
            for u, c in ((prod.a, prod.b), (prod.b, prod.a)):
                if isinstance(c, Const) and isinstance(c.value, int) and c.value > 0 \
                        and mixed_dims((u,), loop_vars) == (None,):
                    dims.append((k[0], u, c.value))
                    found = True
                    break
            else:
                continue
            break
        else:
            return None
    return tuple(dims) if found else None


def parallel_anchor(accesses, loop_vars, eligible=None):
    """The access that anchors a `T.Parallel` nest: the first (buffer, indices) of `accesses`
    whose indices are the nest's loop variables, each exactly once (in any order), among the
    buffers `eligible(buffer)` accepts (all when None).  Returns (buffer, dims) or None.

    Both layout inference and the CUDA lowering use this one rule, so the fragment whose layout
    a nest inherits is the fragment the lowered nest iterates over."""
    for buf, idx in accesses:
        if eligible is not None and not eligible(buf):
            continue
        dims = loop_dims(idx, loop_vars)
        if dims is not None and len(dims) == len(loop_vars) == len(set(dims)):
            return buf, dims
    return None


def writes_a_projection(body, loop_vars) -> bool:
    """Whether `body` (a `T.Parallel` nest's) stores into a fragment through indices that leave
    some loop variable out (`acc[j] += x[i, j]`: a reduction over i).  Such a nest must not
    spread the missing loop dimension over threads: each copy of `acc[j]` would then sum a
    different part (layout.fragment.extend_over_loop, `spread=False`)."""
    from .functor import collect
    from .stmt import Store
    for st in collect(body, lambda n: isinstance(n, Store) and n.buffer.scope == "fragment"):
        dims = mixed_dims(st.indices, loop_vars)
        used = set() if dims is None else {k for k in dims if k is not None}
        if len(used) != len(loop_vars):
            return True
    return False


def partial_anchor(accesses, loop_vars, eligible=None):
    """When no access anchors a `T.Parallel` nest (`parallel_anchor`): the access indexed by
    distinct loop variables covering the most of them (the first on ties), e.g. a row vector
    `m[i]` in `for i, j in T.Parallel(M, N)`; the nest then runs over that fragment's layout
    extended over the other loop dimensions (layout.fragment.extend_over_loop).  Returns
    (buffer, dims) or None."""
    best = None
    for buf, idx in accesses:
        if eligible is not None and not eligible(buf):
            continue
        dims = loop_dims(idx, loop_vars)
        if dims is None or len(set(dims)) != len(dims) or not dims:
            continue
        if best is None or len(dims) > len(best[1]):
            best = (buf, dims)
    return best


def unit_anchor(accesses, loop_vars):
    """When neither `parallel_anchor` nor `partial_anchor` finds one: an access indexed by every loop
    variable exactly once and, in its other dimensions, by uniform values into dimensions of size 1
    (`logits[i, 0]` of an [N, 1] fragment in `for i in T.Parallel(N)`): the nest runs over that
    fragment's layout without its unit dimensions.  Returns (buffer, per-dimension loop position or
    None) or None."""
    for buf, idx in accesses:
        dims = mixed_dims(idx, loop_vars)
        if dims is None:
            continue
        used = [k for k in dims if k is not None]
        if (sorted(used) == list(range(len(loop_vars)))
                and all(k is not None or buf.shape[d] == 1 for d, k in enumerate(dims))):
            return buf, dims
    return None


def slice_dims(src: Region, dst: Region):
    """For a copy of a slice of fragment `src` into the whole fragment `dst`: per dimension of
    src, the dst dimension it fills (whole dimensions, in order) or None (a unit extent: a uniform
    index), and the list of whole dimensions; (None, None) when the slice is anything else."""
    dims, full = [], []
    for k, (start, ext) in enumerate(zip(src.starts, src.extents)):
        if same(ext, src.buffer.shape[k]) and _is_zero(start) and not same(ext, 1):
            dims.append(len(full))
            full.append(k)
        elif same(ext, 1):
            dims.append(None)
        else:
            return None, None
    if not same_seq((src.buffer.shape[k] for k in full), (n for n in dst.buffer.shape if not same(n, 1))) \
            or len(full) != dst.buffer.ndim:
        return None, None
    return tuple(dims), full


def _is_zero(e) -> bool:
    from .expr import is_const
    return is_const(e, 0)


# ---- fresh variables -----------------------------------------------------------------------------

class FreshVars:
    """Numbered loop variables (`i1`, `i2`, ...) for the loops a whole-tile op lowers to; the
    printers give every variable a unique C name, so numbering only has to be readable."""

    def __init__(self):
        self.n = 0

    def var(self, base="i"):
        self.n += 1
        return Var(f"{base}{self.n}")

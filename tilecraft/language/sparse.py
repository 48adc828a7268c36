"""`T.gemm_sp` / `T.gemm_sp_v2`: C += A @ B where A is 2:4 structured-sparse, given compressed.

What the operands mean (TileLang's meaning, the format `tilecraft.utils.sparse.compress` writes):
- `A_sparse` (M, K/2): in each group of 4 consecutive k of a row of the dense A, the 2 kept values,
  in increasing k order (with `transpose_A=True` it is stored (K/2, M)).
- `E` (M, K/bits(E)), an integer tensor: each element holds bits(E)/4 groups, 4 bits per group, the
  group of k-quad q in bits 4*(q % (bits/4)) upwards; a group's low 2 bits give the position (0..3)
  of its first kept value, the next 2 bits that of its second (the metadata of PTX `mma.sp`, in the
  logical row-major order: tilecraft keeps global tensors in that order, see language/layout.py).

How it lowers (for now; honest in `kernel.get_plan()`): a `T.Parallel` loop expands A_sparse and
E into a dense (M, K) shared tile -- the positions E does not name get zero -- and a dense `T.gemm`
multiplies it with B.  That is exactly the dense product of the decompressed A on every target (the
CPU reference included), but does not yet use the sparse tensor cores (`mma.sp`); it costs one
extra shared tile of M*K elements.
"""
from __future__ import annotations

import dataclasses

from ..ir import Alloc, Buffer, For, Load, Store, Var, binary, cast, const, select
from ..ir import dtype as dt
from .builder import error, require_kernel
from .tileops import as_region, gemm
from .types import GemmWarpPolicy

NOTE = ("gemm_sp: A decompressed from A_sparse and E into a dense shared tile for this dense gemm "
        "(correct, not yet sparse-fast: no mma.sp)")


def _whole(x, what: str, scopes=("shared", "fragment", "local")) -> Buffer:
    """The operand as a whole on-chip buffer (gemm_sp reads whole tiles, as its TileLang form does)."""
    r = as_region(x, f"T.gemm_sp {what}")
    buf = r.buffer
    if buf.scope not in scopes:
        raise error(f"T.gemm_sp: {what} {buf.name} is in {buf.scope} memory; it must be a "
                    f"{' or '.join(scopes)} tile", hint="copy it into a T.alloc_shared tile first")
    if tuple(r.extents) != tuple(buf.shape) or buf.ndim != 2:
        raise error(f"T.gemm_sp: {what} must be a whole 2-D tile, got {buf.name}[...] {tuple(r.extents)}")
    return buf


def _hoisted_alloc(b, buf: Buffer) -> None:
    """Allocate `buf` at the top of the kernel body (the gemm_sp may sit inside a pipelined loop,
    whose body must not allocate)."""
    depth = getattr(b.kernel, "body_depth", None)
    if depth is None or depth >= len(b.blocks):
        b.emit(Alloc(buf, None, span=b.span))
    else:
        b.blocks[depth].insert(0, Alloc(buf, None, span=b.span))


def gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
            clear_accum=False, k_pack=1, wg_wait=0, transpose_E=False):
    """C += A @ B with A given 2:4-compressed (`A_sparse`: the two kept values of every group of 4 along
    K; `E`: their positions, 4 bits a group, as (M, K/bits), or (K/bits, M) with `transpose_E`)."""
    b = require_kernel("T.gemm_sp")
    a = _whole(A_sparse, "A_sparse")
    e = _whole(E, "E (metadata)")
    if not e.dtype.is_int:
        raise error(f"T.gemm_sp: the metadata {e.name} is {e.dtype}; it must be an integer tile "
                    f"(uint8 / int16 / int32 as tilelang.utils.sparse.compress makes it)")
    if a.dtype.bits not in (8, 16):
        raise error(f"T.gemm_sp: A_sparse {a.name} is {a.dtype}; tilecraft's gemm_sp takes 16-bit and "
                    f"8-bit operands (2:4 sparsity); 32-bit (1:2) is not supported yet")
    ebits = e.dtype.bits
    rows, half = (a.shape[1], a.shape[0]) if transpose_A else (a.shape[0], a.shape[1])
    k = 2 * half
    want_e = (k // ebits, rows) if transpose_E else (rows, k // ebits)
    if k % ebits or tuple(e.shape) != want_e:
        layout = "(K/2, M)" if transpose_A else "(M, K/2)"
        raise error(f"T.gemm_sp: A_sparse {a.name} {tuple(a.shape)} is {layout} with M={rows}, K={k}, so the "
                    f"{e.dtype} metadata {e.name} must be {want_e} (one {ebits}-bit element per {ebits} "
                    f"k-values{', transposed' if transpose_E else ''}), got {tuple(e.shape)}")
    dense_shape = (k, rows) if transpose_A else (rows, k)
    dense = Buffer(b.fresh_name(f"{a.name}_dense"), dense_shape, a.dtype, "shared", span=b.span)
    _hoisted_alloc(b, dense)

    i, kk = Var(b.fresh_name("sp_i")), Var(b.fresh_name("sp_k"))
    group, pos = kk // 4, kk % 4
    word = cast(Load(e, (kk // ebits, i) if transpose_E else (i, kk // ebits)), dt.int32)
    nibble = (word >> ((group % (ebits // 4)) * 4)) & 15

    def kept(j):  # the group's j-th kept value
        return Load(a, (group * 2 + j, i) if transpose_A else (i, group * 2 + j))

    # (IR nodes compare by identity: `==` on them is Python's, so the comparisons are built with binary)
    value = select(binary("==", pos, nibble & 3), kept(0),
                   select(binary("==", pos, (nibble >> 2) & 3), kept(1), const(0, a.dtype)))
    idx = (kk, i) if transpose_A else (i, kk)
    body = Store(dense, idx, cast(value, a.dtype), span=b.span)
    outer, inner = ((kk, k), (i, rows)) if transpose_A else ((i, rows), (kk, k))
    loop = For(inner[0], const(0), const(inner[1]), "parallel", body, 1, (), span=b.span)
    loop = For(outer[0], const(0), const(outer[1]), "parallel", loop, 1, (), span=b.span)
    b.emit(loop)

    gemm(dense, B, C, transpose_A, transpose_B, policy, clear_accum, k_pack, wg_wait)
    op = b.blocks[-1][-1]
    b.blocks[-1][-1] = dataclasses.replace(op, note=NOTE)


def gemm_sp_v2(A_sparse, E, B, C, transpose_A=False, transpose_B=False, transpose_E=False,
               policy=GemmWarpPolicy.Square, clear_accum=False, k_pack=1, wg_wait=0):
    """TileLang's second gemm_sp front end (same meaning)."""
    gemm_sp(A_sparse, E, B, C, transpose_A, transpose_B, policy, clear_accum, k_pack, wg_wait, transpose_E)

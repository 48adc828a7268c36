"""Convolution tile ops of the language: `T.c2d_im2col`.

`T.c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)` fills the shared tile
`col` (block_M, block_K) with one tile of the im2col matrix of the NHWC image `img` for a 2-D
convolution with a square `kernel` x `kernel` window: row m of the im2col matrix is the output
pixel (n, oh, ow) flattened as n * OH * OW + oh * OW + ow, column k is the window element
(kh, kw, c) flattened as (kh * kernel + kw) * C + c, and the tile is the one at block row
`nhw_step` and block column `c_step`:

    col[i, j] = img[n, oh * stride + kh * dilation - pad, ow * stride + kw * dilation - pad, c]

with m = nhw_step * block_M + i and k = c_step * block_K + j.  Elements whose image position lies
in the padding, and rows/columns past the im2col matrix (m >= N * OH * OW, k >= kernel^2 * C), are
zero.  This is TileLang's meaning (there it may lower to a TMA im2col copy on Hopper); the column
order matches a filter laid out (KH, KW, C, F) and flattened to (KH * KW * C, F).

Like `T.transpose`, the op is lowered where it is built, to a T.Parallel loop with a guarded load,
so it is correct on every target that loop is (the CPU reference and CUDA alike).
"""
from __future__ import annotations

from ..ir import Buffer, For, Load, Store, Var, binary, cast, const
from ..ir.expr import select
from .builder import error, require_kernel, warn_once


def _static_int(value, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"T.c2d_im2col: {what} must be a Python integer known when the kernel is built, "
                    f"got {value!r}")
    if value < minimum:
        raise error(f"T.c2d_im2col: {what} must be >= {minimum}, got {value}")
    return value


def c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None):
    """Fill shared tile `col` with the (nhw_step, c_step) tile of the im2col matrix of NHWC `img`
    (see the module docstring); zero outside the image and past the matrix."""
    b = require_kernel("T.c2d_im2col")
    if eviction_policy not in (None, "evict_normal", "evict_first", "evict_last"):
        raise error(f"T.c2d_im2col: eviction_policy must be None, 'evict_normal', 'evict_first' or "
                    f"'evict_last', got {eviction_policy!r}")
    if eviction_policy is not None:
        warn_once(("T.c2d_im2col", "eviction_policy"), "T.c2d_im2col: eviction_policy is accepted and "
                  "ignored (tilecraft emits default cache hints)")
    if not isinstance(img, Buffer) or img.ndim != 4:
        raise error(f"T.c2d_im2col: the image must be a whole 4-D (N, H, W, C) tensor, got "
                    f"{getattr(img, 'name', img)!r}" + (f" of shape {tuple(img.shape)}"
                                                        if isinstance(img, Buffer) else ""))
    if img.scope != "global":
        raise error(f"T.c2d_im2col: the image {img.name} must be a global tensor, not a {img.scope} buffer")
    if not isinstance(col, Buffer) or col.ndim != 2:
        raise error(f"T.c2d_im2col: the destination must be a whole 2-D (block_M, block_K) shared tile, "
                    f"got {getattr(col, 'name', col)!r}" + (f" of shape {tuple(col.shape)}"
                                                           if isinstance(col, Buffer) else ""))
    if col.scope != "shared":
        raise error(f"T.c2d_im2col: the destination {col.name} must be a shared tile (T.alloc_shared), "
                    f"not a {col.scope} buffer")
    shape = tuple(img.shape)
    if not all(isinstance(s, int) for s in shape) or not all(isinstance(s, int) for s in col.shape):
        raise error(f"T.c2d_im2col: {img.name} {shape} and {col.name} {tuple(col.shape)} must have "
                    f"static shapes")
    kernel = _static_int(kernel, "kernel", 1)
    stride = _static_int(stride, "stride", 1)
    dilation = _static_int(dilation, "dilation", 1)
    pad = _static_int(pad, "pad", 0)
    n_img, h, w, c = shape
    oh = (h + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    ow = (w + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    if oh < 1 or ow < 1:
        raise error(f"T.c2d_im2col: a {kernel}x{kernel} window (dilation {dilation}, pad {pad}) does not "
                    f"fit the {h}x{w} image of {img.name} {shape}: the output would be {oh}x{ow}")
    block_m, block_k = col.shape
    rows, cols = n_img * oh * ow, kernel * kernel * c
    for step, what, blocks in ((nhw_step, "nhw_step", -(-rows // block_m)),
                               (c_step, "c_step", -(-cols // block_k))):
        if isinstance(step, int) and not isinstance(step, bool) and not 0 <= step < blocks:
            raise error(f"T.c2d_im2col: {what} = {step} is outside the {blocks} tiles of "
                        f"{col.name} {tuple(col.shape)} that cover the im2col matrix ({rows}, {cols})")

    i, j = Var(b.fresh_name("im_i")), Var(b.fresh_name("im_j"))
    m = binary("+", binary("*", nhw_step, const(block_m)), i)
    k = binary("+", binary("*", c_step, const(block_k)), j)
    pix = binary("%", m, const(oh * ow))
    ih = binary("-", binary("+", binary("*", binary("//", pix, const(ow)), const(stride)),
                            binary("*", binary("//", k, const(kernel * c)), const(dilation))), const(pad))
    iw = binary("-", binary("+", binary("*", binary("%", pix, const(ow)), const(stride)),
                            binary("*", binary("%", binary("//", k, const(c)), const(kernel)),
                                   const(dilation))), const(pad))
    inside = const(True)
    for cond in (binary("<", m, const(rows)), binary("<", k, const(cols)),
                 binary(">=", ih, const(0)), binary("<", ih, const(h)),
                 binary(">=", iw, const(0)), binary("<", iw, const(w))):
        inside = binary("and", inside, cond)
    value = Load(img, (binary("//", m, const(oh * ow)), ih, iw, binary("%", k, const(c))), span=b.span)
    store = Store(col, (i, j), select(inside, cast(value, col.dtype), cast(const(0), col.dtype)),
                  span=b.span)
    b.emit(For(i, const(0), const(block_m), "parallel",
               For(j, const(0), const(block_k), "parallel", store, span=b.span), span=b.span))

"""`T.c2d_im2col`: one im2col tile of an NHWC image, for a convolution written as a GEMM.

Meaning (TileLang's): the image `img` is (N, H, W, C); the convolution has a square kernel of side
`kernel`, and `stride`, `dilation`, `pad` (the same along H and W), so the output is (N, OH, OW)
with OH = (H + 2*pad - dilation*(kernel-1) - 1) // stride + 1 (OW alike).  The im2col matrix has
one row per output pixel m = (n*OH + oh)*OW + ow (N*OH*OW rows) and one column per kernel tap and
channel, in the order (kh, kw, c): k = (kh*kernel + kw)*C + c (kernel*kernel*C columns); its element
is img[n, oh*stride + kh*dilation - pad, ow*stride + kw*dilation - pad, c], or 0 where that point is
in the padding.  `col` (BM, BK) receives the tile of rows nhw_step*BM .. +BM and columns
c_step*BK .. +BK; rows or columns past the end of the matrix are 0 too (a ragged last tile).

Lowered here, like `T.transpose`, to a T.Parallel loop over the tile that stores a bounds-checked
select, so every target that runs T.Parallel runs it (CPU reference, CUDA); no new IR node.
"""
from __future__ import annotations

from ..ir import Buffer, For, Load, Store, Var, as_expr, binary, cast, const
from ..ir.expr import select
from .builder import error, require_kernel, warn_once


def _static_int(value, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np
            if isinstance(value, np.integer):
                value = int(value)
        except ImportError:  # pragma: no cover - numpy is a dependency
            pass
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"T.c2d_im2col: {what} must be a Python int known when the kernel is built, got {value!r}")
    if value < minimum:
        raise error(f"T.c2d_im2col: {what} must be >= {minimum}, got {value}")
    return value


def c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None):
    b = require_kernel("T.c2d_im2col")
    if not isinstance(img, Buffer) or img.ndim != 4:
        raise error(f"T.c2d_im2col: the image must be a whole 4-D (N, H, W, C) tensor, got "
                    f"{getattr(img, 'name', img)!r}" + (f" with shape {tuple(img.shape)}"
                                                          if isinstance(img, Buffer) else ""))
    if img.scope != "global":
        raise error(f"T.c2d_im2col: the image {img.name} is in {img.scope} memory; it must be a global "
                    f"(N, H, W, C) tensor")
    if not isinstance(col, Buffer) or col.ndim != 2:
        raise error(f"T.c2d_im2col: the destination must be a whole 2-D (block_M, block_K) tile, got "
                    f"{getattr(col, 'name', col)!r}" + (f" with shape {tuple(col.shape)}"
                                                          if isinstance(col, Buffer) else ""))
    if col.scope not in ("shared", "fragment", "local"):
        raise error(f"T.c2d_im2col: the destination {col.name} is in {col.scope} memory; it must be a "
                    f"T.alloc_shared (or fragment) tile")
    dims = []
    for d, (size, name) in enumerate(zip(img.shape, "NHWC")):
        if not isinstance(size, int):
            raise error(f"T.c2d_im2col: dimension {name} of {img.name} {tuple(img.shape)} must be a "
                        f"static size, got {size!r}")
        dims.append(size)
    bm, bk = col.shape
    if not (isinstance(bm, int) and isinstance(bk, int)):
        raise error(f"T.c2d_im2col: the tile {col.name} {tuple(col.shape)} must have a static shape")
    k = _static_int(kernel, "kernel", 1)
    s = _static_int(stride, "stride", 1)
    dl = _static_int(dilation, "dilation", 1)
    p = _static_int(pad, "pad", 0)
    n, h, w, c = dims
    oh = (h + 2 * p - dl * (k - 1) - 1) // s + 1
    ow = (w + 2 * p - dl * (k - 1) - 1) // s + 1
    if oh < 1 or ow < 1:
        raise error(f"T.c2d_im2col: a {k}x{k} kernel with dilation {dl} and pad {p} does not fit the "
                    f"{h}x{w} image of {img.name} {tuple(img.shape)} (output would be {oh}x{ow})")
    rows, cols = n * oh * ow, k * k * c
    if eviction_policy is not None:
        warn_once(("c2d_im2col", "eviction_policy"), "T.c2d_im2col: eviction_policy is accepted and "
                  "ignored (tilecraft emits default cache hints)")
    nhw_step, c_step = as_expr(nhw_step, span=b.span), as_expr(c_step, span=b.span)

    i, j = Var(b.fresh_name("im_i")), Var(b.fresh_name("im_j"))
    m = binary("+", binary("*", nhw_step, bm), i)
    kk = binary("+", binary("*", c_step, bk), j)
    pix = binary("%", m, oh * ow)
    ah = binary("-", binary("+", binary("*", binary("//", pix, ow), s),
                             binary("*", binary("//", kk, k * c), dl)), p)
    aw = binary("-", binary("+", binary("*", binary("%", m, ow), s),
                             binary("*", binary("%", binary("//", kk, c), k), dl)), p)
    inside = const(True)
    for cond in (binary("<", m, rows), binary("<", kk, cols), binary(">=", ah, 0), binary("<", ah, h),
                 binary(">=", aw, 0), binary("<", aw, w)):
        inside = binary("and", inside, cond)
    # Clamp the indices of the load so that even a target evaluating both arms of the select
    # never forms an address outside the image.
    zero = const(0, m.dtype)
    idx = (select(binary("<", m, rows), binary("//", m, oh * ow), zero),
           select(inside, ah, zero), select(inside, aw, zero), binary("%", kk, c))
    value = select(inside, cast(Load(img, idx, span=b.span), col.dtype), const(0, col.dtype))
    store = Store(col, (i, j), value, span=b.span)
    b.emit(For(i, const(0), const(bm), "parallel",
               For(j, const(0), const(bk), "parallel", store, span=b.span), span=b.span))

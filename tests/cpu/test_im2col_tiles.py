"""`T.c2d_im2col` (tilecraft/language/conv.py) on the CPU target against torch, on fresh random inputs:

- the tile itself: every (nhw_step, c_step) tile of the im2col matrix written out to global memory and
  compared with a reference built from `torch.nn.functional.unfold` reordered to (kh, kw, c) columns;
- a convolution as a GEMM through it (the shape of TileLang's examples/convolution programs) against
  `torch.nn.functional.conv2d`, for several strides / dilations / paddings and ragged sizes (rows,
  columns and output channels that are not multiples of the tile);
- errors for shapes that do not fit name the user's line.
GPU twin: tests/gpu/test_im2col_tiles_gpu.py; sm_80 / sm_90a compile: tests/cuda/test_im2col_tiles_compile.py.
"""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError


def out_size(H, W, K, S, D, P):
    return (H + 2 * P - D * (K - 1) - 1) // S + 1, (W + 2 * P - D * (K - 1) - 1) // S + 1


def im2col_ref(img, K, S, D, P):
    """(N*OH*OW, K*K*C) with columns in (kh, kw, c) order, from torch's unfold ((c, kh, kw) order)."""
    N, H, W, C = img.shape
    OH, OW = out_size(H, W, K, S, D, P)
    u = torch.nn.functional.unfold(img.permute(0, 3, 1, 2).float(), K, dilation=D, padding=P, stride=S)
    u = u.view(N, C, K, K, OH * OW).permute(0, 4, 2, 3, 1)  # N, L, kh, kw, c
    return u.reshape(N * OH * OW, K * K * C)


def im2col_tiles(N, C, H, W, K, S, D, P, bm, bk, dtype="float32"):
    OH, OW = out_size(H, W, K, S, D, P)
    rows, cols = N * OH * OW, K * K * C
    gr, gc = -(-rows // bm), -(-cols // bk)

    @T.prim_func
    def main(img: T.Tensor((N, H, W, C), dtype), out: T.Tensor((gr * bm, gc * bk), dtype)):
        with T.Kernel(gc, gr, threads=128) as (bx, by):
            tile = T.alloc_shared((bm, bk), dtype)
            T.c2d_im2col(img, tile, by, bx, K, S, D, P)
            T.copy(tile, out[by * bm, bx * bk])
    return main


def conv_kernel(N, C, H, W, F, K, S, D, P, bm, bn, bk, stages=2, threads=128, dtype="float16",
                accum="float32"):
    OH, OW = out_size(H, W, K, S, D, P)

    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), dtype), kernel: T.Tensor((K, K, C, F), dtype),
             out: T.Tensor((N, OH, OW, F), dtype)):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(N * OH * OW, bm), threads=threads) as (bx, by):
            data_shared = T.alloc_shared((bm, bk), dtype)
            kernel_shared = T.alloc_shared((bk, bn), dtype)
            out_local = T.alloc_fragment((bm, bn), accum)
            out_shared = T.alloc_shared((bm, bn), dtype)
            kernel_flat = T.Tensor((K * K * C, F), dtype, kernel.data)
            out_flat = T.Tensor((N * OH * OW, F), dtype, out.data)
            T.clear(out_local)
            for k_iter in T.Pipelined(T.ceildiv(K * K * C, bk), num_stages=stages):
                T.c2d_im2col(data, data_shared, by, k_iter, K, S, D, P)
                T.copy(kernel_flat[k_iter * bk, bx * bn], kernel_shared)
                T.gemm(data_shared, kernel_shared, out_local)
            T.copy(out_local, out_shared)
            T.copy(out_shared, out_flat[by * bm, bx * bn])
    return main


def conv_ref(a, b, S, P, D):
    c = torch.conv2d(a.permute(0, 3, 1, 2).float(), b.permute(3, 2, 0, 1).float(), stride=S, padding=P,
                     dilation=D)
    return c.permute(0, 2, 3, 1)


# (N, C, H, W, K, S, D, P, bm, bk)
TILE_CASES = [
    (2, 4, 7, 6, 3, 1, 1, 1, 16, 8),     # ragged rows (84) and columns (36)
    (1, 3, 9, 8, 3, 2, 1, 0, 8, 16),     # stride 2, no padding, C not a multiple of anything
    (2, 5, 8, 9, 3, 1, 2, 2, 32, 16),    # dilation 2
    (1, 8, 10, 7, 2, 3, 1, 3, 16, 8),    # even kernel, stride 3, padding larger than the kernel
    (3, 2, 5, 5, 1, 1, 1, 0, 16, 4),     # 1x1 kernel
]


@pytest.mark.parametrize("case", TILE_CASES, ids=[str(c) for c in TILE_CASES])
def test_tile_matches_unfold(case):
    N, C, H, W, K, S, D, P, bm, bk = case
    k = tilelang.compile(im2col_tiles(*case), out_idx=[1], target="cpu")
    img = torch.randn(N, H, W, C)
    got = k(img)
    ref = im2col_ref(img, K, S, D, P)
    rows, cols = ref.shape
    torch.testing.assert_close(got[:rows, :cols], ref)
    # the padding of the ragged last tiles is zero-filled, not left as garbage
    assert torch.count_nonzero(got[rows:, :]) == 0 and torch.count_nonzero(got[:, cols:]) == 0


# (N, C, H, W, F, K, S, D, P, bm, bn, bk)
CONV_CASES = [
    (2, 16, 8, 8, 16, 3, 1, 1, 1, 32, 16, 16),
    (1, 8, 11, 9, 12, 3, 2, 1, 1, 32, 16, 16),    # stride 2, ragged rows / F
    (2, 12, 9, 10, 8, 3, 1, 2, 2, 16, 8, 16),     # dilation 2, K*K*C=108 ragged over bk
    (1, 16, 7, 7, 16, 5, 2, 1, 2, 16, 16, 32),    # 5x5 kernel
    (2, 6, 6, 5, 10, 2, 1, 1, 0, 16, 16, 8),      # even kernel, no padding
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[str(c) for c in CONV_CASES])
def test_conv2d_through_im2col(case):
    N, C, H, W, F, K, S, D, P, bm, bn, bk = case
    k = tilelang.compile(conv_kernel(*case), out_idx=[2], target="cpu")
    a = torch.randn(N, H, W, C).half()
    b = torch.randn(K, K, C, F).half()
    got = k(a, b)
    torch.testing.assert_close(got.float(), conv_ref(a, b, S, P, D), rtol=1e-2, atol=2e-2)


def test_error_kernel_too_large_names_line():
    with pytest.raises(TilecraftError) as e:
        tilelang.compile(im2col_tiles(1, 4, 3, 3, 5, 1, 1, 0, 16, 8), out_idx=[1], target="cpu")
    msg = str(e.value)
    assert "does not fit" in msg and "test_im2col_tiles.py" in msg


def test_error_image_not_4d():
    with pytest.raises(TilecraftError) as e:
        @T.prim_func
        def main(img: T.Tensor((4, 4, 4), "float32"), out: T.Tensor((16, 8), "float32")):
            with T.Kernel(1, threads=32) as bx:
                tile = T.alloc_shared((16, 8), "float32")
                T.c2d_im2col(img, tile, bx, 0, 3, 1, 1, 1)
                T.copy(tile, out)
    msg = str(e.value)
    assert "(N, H, W, C)" in msg and "img" in msg and "test_im2col_tiles.py" in msg

"""`T.c2d_im2col` compiles for sm_80 and sm_90a (NVRTC, no GPU) in the shapes of TileLang's
examples/convolution programs and in a ragged one, and the generated tile store is guarded (rows and
columns past the im2col matrix, points in the padding).  Results against torch: the CPU target in
tests/cpu/test_im2col_tiles.py, the GPU in tests/gpu/test_im2col_tiles_gpu.py."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_im2col_tiles import conv_kernel, im2col_tiles  # noqa: E402

pytestmark = pytest.mark.cuda_compile

# (N, C, H, W, F, K, S, D, P, bm, bn, bk, stages, threads)
CONFIGS = {
    "example": (128, 128, 64, 64, 128, 3, 1, 1, 1, 64, 128, 32, 3, 256),
    "ragged-strided-dilated": (2, 12, 9, 10, 24, 3, 2, 2, 2, 64, 64, 32, 2, 128),
}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_conv_through_im2col_compiles(name, arch):
    N, C, H, W, F, K, S, D, P, bm, bn, bk, stages, threads = CONFIGS[name]
    fn = conv_kernel(N, C, H, W, F, K, S, D, P, bm, bn, bk, stages=stages, threads=threads)
    k = tilelang.compile(fn, out_idx=[2], target={"kind": "cuda", "arch": arch})
    src = k.get_kernel_source()
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    store = src[src.index("data_shared["):]
    store = store[:store.index(";")]
    # the guard compares against the im2col matrix's extent (rows N*OH*OW, columns K*K*C) and the image
    assert f"< {N * OH * OW})" in store and f"< {K * K * C})" in store, store
    assert f"< {H})" in store and f"< {W})" in store and ">= 0)" in store, store
    assert "T.gemm" in k.get_plan()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_im2col_tile_alone_compiles(arch):
    k = tilelang.compile(im2col_tiles(2, 5, 8, 9, 3, 1, 2, 2, 32, 16, dtype="float16"), out_idx=[1],
                         target={"kind": "cuda", "arch": arch})
    assert "tile[" in k.get_kernel_source()

"""`T.c2d_im2col`: a conv2d written as im2col tiles (the shape of TileLang's convolution examples)
against torch.nn.functional.conv2d on the CPU target, over strides, dilations, paddings and ragged
sizes (rows and columns past the im2col matrix are zero-filled); CUDA compiles it for sm_80 and
sm_90a; bad operands are errors at the user's line.  The GPU run is tests/gpu/test_c2d_im2col_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90a"}


def conv_im2col(N, C, H, W, F, K, S, D, P, bm=64, bn=64, bk=32, stages=2):
    """out (N, OH, OW, F) = conv2d of data (N, H, W, C) with filter (K, K, C, F), through im2col."""
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), "float16"), kernel: T.Tensor((K, K, C, F), "float16"),
             out: T.Tensor((N, OH, OW, F), "float16")):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(N * OH * OW, bm), threads=128) as (bx, by):
            data_s = T.alloc_shared((bm, bk), "float16")
            kernel_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            kernel_flat = T.Tensor((K * K * C, F), "float16", kernel.data)
            out_flat = T.Tensor((N * OH * OW, F), "float16", out.data)
            T.clear(acc)
            for k_iter in T.Pipelined(T.ceildiv(K * K * C, bk), num_stages=stages):
                T.c2d_im2col(data, data_s, by, k_iter, K, S, D, P)
                T.copy(kernel_flat[k_iter * bk, bx * bn], kernel_s)
                T.gemm(data_s, kernel_s, acc)
            T.copy(acc, out_flat[by * bm, bx * bn])
    return main


def im2col_tile(N, H, W, C, K, S, D, P, bm, bk, step_m, step_k, dtype="float32"):
    """One (bm, bk) im2col tile written out as it is (no gemm): checks the zero fill exactly."""
    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), dtype), out: T.Tensor((bm, bk), dtype)):
        with T.Kernel(1, threads=64) as bx:
            s = T.alloc_shared((bm, bk), dtype)
            T.c2d_im2col(data, s, step_m, step_k, K, S, D, P)
            T.copy(s, out)
    return main


def torch_conv(x, w, S, D, P):
    y = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(3, 2, 0, 1).float(),
                                   stride=S, padding=P, dilation=D)
    return y.permute(0, 2, 3, 1)


def _check(k, device, N, C, H, W, F, K, S, D, P):
    x = torch.randn(N, H, W, C, device=device).half()
    w = torch.randn(K, K, C, F, device=device).half()
    out = k(x, w)
    torch.testing.assert_close(out.float(), torch_conv(x, w, S, D, P), rtol=1e-2, atol=5e-2)


CASES = [  # N, C, H, W, F, K, S, D, P
    (2, 16, 8, 8, 32, 3, 1, 1, 1),
    (1, 8, 9, 7, 24, 3, 2, 1, 1),       # ragged: rows and columns past the im2col matrix
    (2, 16, 10, 10, 64, 3, 1, 2, 2),    # dilation
    (1, 32, 6, 5, 64, 1, 1, 1, 0),      # 1x1 window
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_conv2d_through_im2col_on_the_cpu_target(case):
    k = tilelang.compile(conv_im2col(*case), out_idx=[2], target="cpu")
    _check(k, "cpu", *case)


def test_one_tile_zero_fill_exact():
    N, H, W, C, K, S, D, P = 1, 5, 4, 3, 3, 1, 1, 1
    OH, OW = 5, 4
    for step_m, step_k in ((0, 0), (1, 0), (1, 1)):
        x = torch.randn(N, H, W, C)
        k = tilelang.compile(im2col_tile(N, H, W, C, K, S, D, P, 16, 16, step_m, step_k),
                             out_idx=[1], target="cpu")
        got = k(x)
        cols = torch.nn.functional.unfold(x.permute(0, 3, 1, 2), K, dilation=D, padding=P, stride=S)
        # unfold orders columns (c, kh, kw); im2col orders them (kh, kw, c)
        cols = cols.reshape(N, C, K * K, OH * OW).permute(0, 3, 2, 1).reshape(N * OH * OW, K * K * C)
        full = torch.zeros(32, 32)
        full[:cols.shape[0], :cols.shape[1]] = cols
        ref = full[step_m * 16:(step_m + 1) * 16, step_k * 16:(step_k + 1) * 16]
        torch.testing.assert_close(got, ref, rtol=0, atol=0)


@pytest.mark.cuda_compile
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90a"])
def test_im2col_compiles_for_cuda(target):
    k = tilelang.compile(conv_im2col(*CASES[1]), out_idx=[2], target=target)
    assert "data" in k.get_kernel_source()  # NVRTC compiled it (compile raises otherwise)


def _build_bad(body):
    @T.prim_func
    def main(data: T.Tensor((1, 8, 8, 4), "float16"), out: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, threads=64) as bx:
            s = T.alloc_shared((16, 16), "float16")
            f = T.alloc_fragment((16, 16), "float16")
            body(data, s, f, out)
    return main


@pytest.mark.parametrize("body,needle", [
    (lambda d, s, f, o: T.c2d_im2col(d, f, 0, 0, 3, 1, 1, 1), "must be a shared tile"),
    (lambda d, s, f, o: T.c2d_im2col(o, s, 0, 0, 3, 1, 1, 1), "4-D (N, H, W, C)"),
    (lambda d, s, f, o: T.c2d_im2col(d, s, 0, 0, 11, 1, 1, 0), "does not fit"),
    (lambda d, s, f, o: T.c2d_im2col(d, s, 9, 0, 3, 1, 1, 1), "nhw_step = 9"),
    (lambda d, s, f, o: T.c2d_im2col(d, s, 0, 0, 3, 0, 1, 1), "stride must be >= 1"),
])
def test_bad_operands_name_the_line(body, needle):
    with pytest.raises(TilecraftError) as e:
        tilelang.compile(_build_bad(body), target="cpu")
    assert needle in str(e.value) and "test_c2d_im2col.py" in str(e.value)



def hinted_tile(policy, N=1, H=5, W=4, C=3, K=3, S=1, D=1, P=1):
    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), "float32"), out: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=64) as bx:
            s = T.alloc_shared((16, 16), "float32")
            T.c2d_im2col(data, s, 0, 0, K, S, D, P, eviction_policy=policy)
            T.copy(s, out)
    return main


def test_eviction_policy_is_checked_and_warned_about():
    # TileLang's signature takes a cache hint; tilecraft accepts the valid ones with one warning and the
    # same result, and refuses a misspelt one at its line
    x = torch.randn(1, 5, 4, 3)
    with pytest.warns(UserWarning, match="eviction_policy is accepted and ignored"):
        hinted = tilelang.compile(hinted_tile("evict_last"), out_idx=[1], target="cpu")
    plain = tilelang.compile(im2col_tile(1, 5, 4, 3, 3, 1, 1, 1, 16, 16, 0, 0), out_idx=[1], target="cpu")
    torch.testing.assert_close(hinted(x), plain(x), rtol=0, atol=0)
    with pytest.raises(TilecraftError, match="eviction_policy must be None"):
        hinted_tile("evict_sometimes")

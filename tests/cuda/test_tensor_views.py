"""`T.Tensor(shape, dtype, X.data)` inside a kernel: the global tensor X seen with another shape
(TileLang's convolution examples view the (KH, KW, C, F) filter as a (KH*KW*C, F) matrix and write
the (N, OH, OW, F) output through an (N*OH*OW, F) view).  Reads and writes through a view reach X's
elements in row-major order on the CPU target (against torch); CUDA compiles it for sm_80 and sm_90a
(a view is never a TMA source: the tensor map is built from a parameter); bad views are errors at
the user's line.  The GPU run is tests/gpu/test_tensor_views_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90a"}


def viewed_matmul(B=4, M=32, K=64, N=64, bm=64, bn=64, bk=32):
    """Out (B, M, N) = X (B, M, K) @ W (K//16, 16, N), with X, W and Out all used through 2-D views."""
    @T.prim_func
    def main(X: T.Tensor((B, M, K), "float16"), W: T.Tensor((K // 16, 16, N), "float16"),
             Out: T.Tensor((B, M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(B * M, bm), threads=128) as (bx, by):
            x2 = T.Tensor((B * M, K), "float16", X.data)
            w2 = T.Tensor((K, N), "float16", W.data)
            out2 = T.Tensor((B * M, N), "float16", Out.data)
            a_s = T.alloc_shared((bm, bk), "float16")
            b_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(x2[by * bm, ko * bk], a_s)
                T.copy(w2[ko * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, out2[by * bm, bx * bn])
    return main


def _check(k, device="cpu", B=4, M=32, K=64, N=64):
    x = torch.randn(B, M, K, device=device).half()
    w = torch.randn(K // 16, 16, N, device=device).half()
    out = k(x, w)
    ref = (x.float().reshape(B * M, K) @ w.float().reshape(K, N)).reshape(B, M, N)
    torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=5e-2)


def test_views_on_the_cpu_target():
    _check(tilelang.compile(viewed_matmul(), out_idx=[2], target="cpu"))


@pytest.mark.cuda_compile
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90a"])
def test_views_compile_for_cuda(target):
    k = tilelang.compile(viewed_matmul(), out_idx=[2], target=target)
    src = k.get_kernel_source()
    assert "// a view" in src and "tc_tma" not in src, "a view aliases its parameter and is not loaded by TMA"


@pytest.mark.cuda_compile
def test_a_write_through_a_view_counts_as_a_write_of_its_tensor():
    from tilecraft.runtime.torch_op import written_params
    assert written_params(viewed_matmul()) == [2]


def _bad(kind):
    @T.prim_func
    def main(X: T.Tensor((4, 8), "float32"), Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            if kind == "dtype":
                v = T.Tensor((32,), "float16", X.data)
            elif kind == "numel":
                v = T.Tensor((4, 9), "float32", X.data)
            else:
                s = T.alloc_shared((32,), "float32")
                v = T.Tensor((4, 8), "float32", s.data)
            for i in T.Parallel(32):
                Y[i] = v[i // 8, i % 8] if kind == "numel" else 0.0
    return main


@pytest.mark.parametrize("kind,msg", [("dtype", "keeps the element type"), ("numel", "has 36 elements"),
                                      ("shared", "only a global tensor")])
def test_bad_views_are_errors_at_the_users_line(kind, msg):
    with pytest.raises(TilecraftError, match=msg) as e:
        _bad(kind)
    assert "test_tensor_views.py" in str(e.value)

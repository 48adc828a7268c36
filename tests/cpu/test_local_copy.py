"""`T.copy` into and out of a thread's own local buffer (`T.alloc_local`) in thread-level code: every
thread moves every element (a local buffer is per thread), as TileLang's own 2:4 compressor
(examples/gemm_sp/sparse_utils.py) relies on.  The copy used to be spread over the block's threads
(`if (tid < 8) buf[tid] = ...`), leaving each thread's buffer mostly unwritten."""
from __future__ import annotations

import torch

import tilecraft as tilelang
import tilecraft.language as T


@tilelang.jit(out_idx=[-1])
def row_sums(R, C):
    @T.prim_func
    def main(X: T.Tensor((R, C), "float32"), Y: T.Tensor((R, C), "float32")):
        with T.Kernel(1, threads=R) as bx:
            tx = T.get_thread_binding()
            buf = T.alloc_local((C,), "float32")
            T.copy(X[tx, 0:C], buf)
            acc = T.alloc_var("float32", 0.0)
            for j in T.serial(C):
                acc += buf[j]
            for j in T.serial(C):
                buf[j] = buf[j] + acc
            T.copy(buf, Y[tx, 0:C])
    return main


def test_each_thread_copies_its_whole_local_buffer(build, device):
    x = torch.randn(64, 8, device=device)
    torch.testing.assert_close(build(row_sums, 64, 8)(x), x + x.sum(1, keepdim=True), rtol=1e-5, atol=1e-5)

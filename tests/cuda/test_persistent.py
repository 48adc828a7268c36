"""`T.Persistent(domain, wave_size, index, group_size)`: a grid of `wave_size` blocks walks every
tile of `domain` exactly once (TileLang's persistent GEMM example).  CPU target against torch for
ragged domains, several block counts and group sizes; sm_90a compiles it on the wgmma/TMA path; a
wrong number of loop variables is an error at the user's line.  GPU run:
tests/gpu/test_persistent_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM90 = {"kind": "cuda", "arch": "sm_90a"}


def persistent_matmul(M, N, K, blocks, group_size=8, bm=64, bn=64, bk=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(blocks, threads=128) as bid:
            a_s = T.alloc_shared((bm, bk), "float16")
            b_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            for tm, tn in T.Persistent([T.ceildiv(M, bm), T.ceildiv(N, bn)], blocks, bid, group_size):
                T.clear(acc)
                for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[tm * bm, ko * bk], a_s)
                    T.copy(B[ko * bk, tn * bn], b_s)
                    T.gemm(a_s, b_s, acc)
                T.copy(acc, C[tm * bm, tn * bn])
    return main


def _check(k, M, N, K, device="cpu"):
    a, b = (torch.randn(*s, device=device).half() for s in ((M, K), (K, N)))
    torch.testing.assert_close(k(a, b), a.float() @ b.float(), rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("M,N,K,blocks,group", [(200, 330, 64, 7, 8), (128, 128, 32, 3, 1), (64, 600, 96, 4, 2)])
def test_every_tile_once_on_the_cpu_target(M, N, K, blocks, group):
    _check(tilelang.compile(persistent_matmul(M, N, K, blocks, group), out_idx=[2], target="cpu"), M, N, K)


@pytest.mark.cuda_compile
def test_persistent_loop_compiles_for_sm90a():
    k = tilelang.compile(persistent_matmul(256, 256, 128, 5), out_idx=[2], target=SM90)
    assert "on wgmma" in k.get_plan()


def test_wrong_number_of_variables_is_an_error():
    with pytest.raises(TilecraftError, match="binds 2 variable") as e:
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(4, threads=32) as bid:
                for t in T.Persistent([2, 2], 4, bid):
                    A[t, 0] = 1.0
    assert "test_persistent.py" in str(e.value)

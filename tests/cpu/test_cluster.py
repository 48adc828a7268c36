"""Thread-block clusters (language/cluster.py) on every target (conftest.py): `T.ClusterKernel`,
`T.block_rank_in_cluster` and `T.alloc_cluster_barrier` with local arrivals compute what torch says on
the CPU target; sm_90a compiles them with `__cluster_dims__`; sm_80 refuses clusters at the line.
Remote arrivals (a cluster's blocks running together): tests/cpu/test_cluster_remote.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError


@tilelang.jit(out_idx=[1])
def rank_and_scale(gx, gy, cluster, bm=32):
    """Each block writes rank * 1000 + (its tile of A summed through a local mbarrier hand-off)."""
    @T.prim_func
    def main(A: T.Tensor((gy * bm, gx * bm), "float32"), R: T.Tensor((gy * bm, gx * bm), "float32")):
        with T.ClusterKernel(gx, gy, threads=128, cluster_dims=cluster) as (bx, by):
            S = T.alloc_shared((bm, bm), "float32")
            bar = T.alloc_cluster_barrier([128])
            rank = T.block_rank_in_cluster()
            T.copy(A[by * bm, bx * bm], S)
            T.mbarrier_arrive(bar)
            T.mbarrier_wait_parity(bar, 0)
            for i, j in T.Parallel(bm, bm):
                R[by * bm + i, bx * bm + j] = S[i, j] + T.cast(rank, "float32") * 1000.0
    return main


def _expected(a, gx, gy, cluster, bm=32):
    cx, cy = (cluster, 1) if isinstance(cluster, int) else (tuple(cluster) + (1,))[:2]
    r = a.clone().cpu()
    for by in range(gy):
        for bx in range(gx):
            rank = bx % cx + cx * (by % cy)
            r[by * bm:(by + 1) * bm, bx * bm:(bx + 1) * bm] += rank * 1000.0
    return r


@pytest.mark.parametrize("cluster", [2, (2, 2), 4, (1, 2)])
def test_block_rank_in_cluster(build, device, cluster):
    gx, gy = 4, 2
    k = build(rank_and_scale, gx, gy, cluster)
    a = torch.randn(gy * 32, gx * 32, device=device)
    torch.testing.assert_close(k(a).cpu(), _expected(a, gx, gy, cluster))


@pytest.mark.cuda_compile
def test_cuda_source_has_the_cluster_dims_and_sm80_refuses():
    func = rank_and_scale.fn(4, 2, (2, 2))
    k = tilelang.compile(func, out_idx=[1], target={"kind": "cuda", "arch": "sm_90a"})
    assert "__cluster_dims__(2, 2, 1)" in k.get_kernel_source()
    with pytest.raises(TilecraftError, match=r"thread-block clusters need an sm_90 GPU") as e:
        tilelang.compile(func, out_idx=[1], target={"kind": "cuda", "arch": "sm_80"})
    assert "test_cluster.py" in str(e.value)


def _bad(kind):
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32")):
        with T.ClusterKernel(3 if kind == "ragged" else 4, threads=128,
                             cluster_dims=16 if kind == "big" else 2) as bx:
            bar = T.alloc_cluster_barrier([1])
    return f


@pytest.mark.parametrize("kind,match", [("ragged", "grid dimension 0 has 3 blocks, not a multiple"),
                                        ("big", "a cluster of 16 blocks")])
def test_bad_clusters_are_errors_at_the_line(kind, match):
    with pytest.raises(TilecraftError, match=match) as e:
        _bad(kind)
    assert "test_cluster.py" in str(e.value)

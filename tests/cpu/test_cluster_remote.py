"""Remote mbarrier arrivals in a thread-block cluster (`T.mbarrier_arrive(bar, cta_id)`, issue 27) on
every target (conftest.py): the two blocks of a cluster hand data to each other, each waiting on its own
shared-memory mbarrier for the other's arrival, and the result is what torch computes; the CPU target
runs a cluster's blocks together (codegen/cpp_threads.py), sm_90a compiles the arrival as mapa +
mbarrier.arrive.release.cluster, sm_80 refuses clusters at the line, a bad rank or a deadlock is an
error naming the line, never a hang."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError


@tilelang.jit
def ping_pong(n_clusters, steps, bm=32, bn=64):
    """Each cluster's two blocks take turns: at step k block k % 2 waits for the other's arrival (the
    other's previous step), stages A[k]'s tile of its cluster through shared memory, writes
    W[its rank] = W[the other's rank] + 2 * A[k] and arrives on the other block's mbarrier.  Only the
    remote arrivals order the steps: W's final value depends on every step running in turn.  W holds
    zeros at the start."""
    @T.prim_func
    def main(A: T.Tensor((steps, n_clusters * bm, bn), "float32"),
             W: T.Tensor((2, n_clusters * bm, bn), "float32")):
        with T.ClusterKernel(2 * n_clusters, threads=128, cluster_dims=2) as bx:
            S = T.alloc_shared((bm, bn), "float32")
            ready = T.alloc_cluster_barrier([128])   # the other block's 128 threads arrive per step
            rank = T.block_rank_in_cluster()
            row = (bx // 2) * bm
            for k in T.serial(steps):
                if rank == k % 2:
                    if k > 0:   # the other block's arrivals so far: (k + 1) // 2 phases
                        T.mbarrier_wait_parity(ready, ((k + 1) // 2 - 1) % 2)
                    T.copy(A[k, row, 0], S)
                    for i, j in T.Parallel(bm, bn):
                        W[rank, row + i, j] = W[1 - rank, row + i, j] + 2.0 * S[i, j]
                    T.mbarrier_arrive(ready, 1 - rank)
    return main


def _ping_pong_ref(a: torch.Tensor) -> torch.Tensor:
    w = torch.zeros((2,) + tuple(a.shape[1:]), dtype=a.dtype)
    for k in range(a.shape[0]):
        w[k % 2] = w[1 - k % 2] + 2.0 * a[k]
    return w


@pytest.mark.parametrize("n_clusters,steps", [(1, 5), (3, 8)])
def test_two_blocks_hand_data_to_each_other(build, device, n_clusters, steps):
    k = build(ping_pong, n_clusters, steps)
    a = torch.randn(steps, n_clusters * 32, 64, device=device)
    w = torch.zeros(2, n_clusters * 32, 64, device=device)
    k(a, w)
    torch.testing.assert_close(w.cpu(), _ping_pong_ref(a.cpu()))


@tilelang.jit(out_idx=[2])
def ring_across_blocks(n_clusters, k_iters, stages=2, bm=32, bn=32):
    """A producer/consumer ring of `stages` slots between the two blocks of each cluster: block 1 fills
    slot k % stages of a global ring with (k + 1) * A[k], once block 0 has emptied it (its arrival on
    block 1's `empty`), and arrives on block 0's `full`; block 0 waits on its `full`, accumulates the
    slot and arrives on block 1's `empty`.  A slot reused too early or read too soon changes C."""
    @T.prim_func
    def main(A: T.Tensor((k_iters, n_clusters * bm, bn), "float32"),
             R: T.Tensor((n_clusters, stages, bm, bn), "float32"),
             C: T.Tensor((n_clusters * bm, bn), "float32")):
        with T.ClusterKernel(2 * n_clusters, threads=64, cluster_dims=2) as bx:
            full = T.alloc_cluster_barrier([64] * stages)    # block 0's: block 1's 64 threads arrive
            empty = T.alloc_cluster_barrier([64] * stages)   # block 1's: block 0's 64 threads arrive
            acc = T.alloc_fragment((bm, bn), "float32")
            rank = T.block_rank_in_cluster()
            c = bx // 2
            T.clear(acc)
            if rank == 1:
                for k in T.serial(k_iters):
                    T.mbarrier_wait_parity(empty[k % stages], ((k // stages) & 1) ^ 1)
                    for i, j in T.Parallel(bm, bn):
                        R[c, k % stages, i, j] = A[k, c * bm + i, j] * T.cast(k + 1, "float32")
                    T.mbarrier_arrive(full[k % stages], 0)
            else:
                for k in T.serial(k_iters):
                    T.mbarrier_wait_parity(full[k % stages], (k // stages) & 1)
                    for i, j in T.Parallel(bm, bn):
                        acc[i, j] += R[c, k % stages, i, j]
                    T.mbarrier_arrive(empty[k % stages], 1)
                T.copy(acc, C[c * bm, 0])
    return main


@pytest.mark.parametrize("n_clusters,k_iters,stages", [(1, 7, 2), (2, 9, 3)])
def test_a_ring_of_slots_between_a_producer_and_a_consumer_block(build, device, n_clusters, k_iters, stages):
    k = build(ring_across_blocks, n_clusters, k_iters, stages)
    a = torch.randn(k_iters, n_clusters * 32, 32, device=device)
    ring = torch.zeros(n_clusters, stages, 32, 32, device=device)
    scale = torch.arange(1, k_iters + 1, dtype=torch.float32).view(k_iters, 1, 1)
    torch.testing.assert_close(k(a, ring).cpu(), (a.cpu() * scale).sum(0))


@tilelang.jit(out_idx=[1])
def gather_to_leader(cluster, bm=16, bn=32):
    """Every block of a cluster of `cluster` (1-D) writes its tile of A (x rank + 1) to global memory and
    arrives on the leader's (rank 0's) mbarrier; the leader waits for all of them and writes their sum."""
    @T.prim_func
    def main(A: T.Tensor((4 * bm, bn), "float32"), C: T.Tensor((4 // cluster * bm, bn), "float32")):
        with T.ClusterKernel(4, threads=64, cluster_dims=cluster) as bx:
            gathered = T.alloc_cluster_barrier([64 * cluster])
            P = T.alloc_shared((bm, bn), "float32")
            rank = T.block_rank_in_cluster()
            T.copy(A[bx * bm, 0], P)
            for i, j in T.Parallel(bm, bn):
                A[bx * bm + i, j] = P[i, j] * T.cast(rank + 1, "float32")
            T.mbarrier_arrive(gathered, 0)
            if rank == 0:
                T.mbarrier_wait_parity(gathered, 0)
                T.clear(P)
                for r in T.serial(cluster):
                    for i, j in T.Parallel(bm, bn):
                        P[i, j] += A[(bx + r) * bm + i, j]
                T.copy(P, C[bx // cluster * bm, 0])
    return main


@pytest.mark.parametrize("cluster", [2, 4])
def test_blocks_arrive_on_the_leaders_mbarrier(build, device, cluster):
    k = build(gather_to_leader, cluster)
    a = torch.randn(4 * 16, 32, device=device)
    scaled = a.cpu().reshape(4 // cluster, cluster, 16, 32) * torch.arange(1, cluster + 1).view(1, cluster, 1, 1)
    torch.testing.assert_close(k(a.clone()).cpu(), scaled.sum(1).reshape(4 // cluster * 16, 32))


@tilelang.jit(out_idx=[1])
def gather_2d(cx, cy, bm=16, bn=16):
    """A 2 x 4 grid in clusters of (cx, cy): each block adds rank * 100 to its tile of A in place and
    arrives on its cluster leader's mbarrier; the leader then writes 2 x every tile of its cluster."""
    @T.prim_func
    def main(A: T.Tensor((4 * bm, 2 * bn), "float32"), C: T.Tensor((4 * bm, 2 * bn), "float32")):
        with T.ClusterKernel(2, 4, threads=32, cluster_dims=(cx, cy)) as (bx, by):
            bar = T.alloc_cluster_barrier([32 * cx * cy])
            rank = T.block_rank_in_cluster()
            for i, j in T.Parallel(bm, bn):
                A[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] + T.cast(rank, "float32") * 100.0
            T.mbarrier_arrive(bar, 0)
            if rank == 0:
                T.mbarrier_wait_parity(bar, 0)
                for r in T.serial(cx * cy):
                    for i, j in T.Parallel(bm, bn):
                        C[(by + r // cx) * bm + i, (bx + r % cx) * bn + j] = \
                            A[(by + r // cx) * bm + i, (bx + r % cx) * bn + j] * 2.0
    return main


@pytest.mark.parametrize("cx,cy", [(1, 2), (2, 2), (1, 4)])
def test_two_dimensional_clusters_rank_their_blocks_as_the_gpu(build, device, cx, cy):
    k = build(gather_2d, cx, cy)
    a = torch.randn(64, 32, device=device)
    expected = a.cpu().clone()
    for by in range(4):
        for bx in range(2):
            expected[by * 16:(by + 1) * 16, bx * 16:(bx + 1) * 16] += (bx % cx + cx * (by % cy)) * 100.0
    torch.testing.assert_close(k(a.clone()).cpu(), expected * 2.0)


def _program(kind):
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32")):
        with T.ClusterKernel(4, threads=64, cluster_dims=2) as bx:
            bar = T.alloc_cluster_barrier([64])
            rank = T.block_rank_in_cluster()
            if kind == "bad_rank":
                T.mbarrier_arrive(bar, rank + 1)          # rank 1 arrives on a block of rank 2: none
                T.mbarrier_wait_parity(bar, 0)
            else:   # "deadlock": both blocks arrive on rank 0's mbarrier, rank 1 waits on its own
                T.mbarrier_arrive(bar, 0)
                T.mbarrier_wait_parity(bar, 0)
            for i in T.Parallel(64):
                A[bx, i] = 1.0
    return f


def test_a_rank_outside_the_cluster_is_an_error_at_the_line():
    k = tilelang.compile(_program("bad_rank"), target="cpu")
    with pytest.raises(TilecraftError, match=r"test_cluster_remote.py:\d+: T.mbarrier_arrive\(bar, cta_id\): cta_id "
                                             r"is outside 0..1"):
        k(torch.zeros(64, 64))


def test_a_deadlock_across_the_cluster_names_each_block_and_wait():
    k = tilelang.compile(_program("deadlock"), target="cpu")
    with pytest.raises(TilecraftError) as e:
        k(torch.zeros(64, 64))
    text = str(e.value)
    assert "deadlock: every live thread of the cluster's blocks waits" in text
    assert "in the cluster's block of rank 1" in text and "test_cluster_remote.py" in text
    assert "wait on an mbarrier for its phase of parity 0" in text


def test_a_constant_rank_outside_the_cluster_and_a_remote_arrival_outside_one_are_errors_at_the_line():
    def big_rank():
        @T.prim_func
        def f(A: T.Tensor((64,), "float32")):
            with T.ClusterKernel(4, threads=32, cluster_dims=2) as bx:
                bar = T.alloc_cluster_barrier([32])
                T.mbarrier_arrive(bar, 2)
        return f
    with pytest.raises(TilecraftError, match=r"no block of rank 2 in this cluster; the cluster's blocks are ranked "
                                             r"0..1") as e:
        big_rank()
    assert "test_cluster_remote.py" in str(e.value)

    def no_cluster(cta):
        @T.prim_func
        def f(A: T.Tensor((64,), "float32")):
            with T.Kernel(4, threads=32) as bx:
                bar = T.alloc_barrier([32])
                T.mbarrier_arrive(bar, cta(bx))
                T.mbarrier_wait_parity(bar, 0)
                A[bx] = 1.0
        return f
    with pytest.raises(TilecraftError, match=r"needs a thread-block cluster; this kernel is not a T.ClusterKernel"):
        no_cluster(lambda bx: bx % 2)
    k = tilelang.compile(no_cluster(lambda bx: 0), target="cpu")   # a cluster of one: rank 0 is the block itself
    a = torch.zeros(64)
    k(a)
    assert a[:4].tolist() == [1.0] * 4 and not a[4:].any()


def test_the_tile_path_refuses_remote_arrivals_at_the_line():
    func = ping_pong.fn(1, 2)
    with pytest.raises(TilecraftError, match=r"needs the cluster's blocks to run together, which the CPU target "
                                             r"does in its thread-level mode only") as e:
        tilelang.compile(func, target="cpu", pass_configs={"tc.cpu_threads": False})
    assert "test_cluster_remote.py" in str(e.value)


@pytest.mark.cuda_compile
def test_cuda_sm90a_arrives_through_mapa_and_sm80_refuses():
    func = ping_pong.fn(2, 4)
    src = tilelang.compile(func, target={"kind": "cuda", "arch": "sm_90a"}).get_kernel_source()
    assert "__cluster_dims__(2, 1, 1)" in src
    assert src.count("tc::mbar_arrive_cluster(") == 1 and "tc::mbar_arrive(" not in src
    # the waits acquire at cluster scope, pairing with the other block's release.cluster arrival
    assert src.count("tc::mbar_wait_parity_cluster(") == 1 and "tc::mbar_wait_parity(" not in src
    # the mbarriers are set up in every block before any block arrives remotely, and no block exits
    # while the other may still arrive on its mbarrier
    assert src.count("tc::cluster_sync()") == 2
    assert src.index("tc::mbar_init(") < src.index("tc::cluster_sync()") < src.index("tc::mbar_arrive_cluster(")
    assert src.rstrip().rstrip("}").rstrip().endswith("tc::cluster_sync();")
    with pytest.raises(TilecraftError, match=r"thread-block clusters need an sm_90 GPU") as e:
        tilelang.compile(func, target={"kind": "cuda", "arch": "sm_80"})
    assert "test_cluster_remote.py" in str(e.value)

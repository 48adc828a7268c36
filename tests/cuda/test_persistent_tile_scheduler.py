"""`T.PersistentTileScheduler` (TileLang's persistent, grid-strided tile scheduler; language/
tile_schedule.py): `init` / `valid` / `next_tile` drive a `while` loop, `m_idx` / `n_idx` /
`current_iter` are its state (read bare or as `[0]`), `coord` is the stateless decode.  CPU target
against torch and against an independent enumeration of TileLang's documented order (panels of
`swizzle_size` slow-axis tiles, M fastest when column_major, cluster rows when cluster_size > 1);
sm_90a compiles the scheduled GEMM.  Also: a slice whose bounds divide exactly by a constant
(`(x * 256) // 2 : ((x + 1) * 256) // 2`) has its static extent (TileLang's arithmetic proves it)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM90 = {"kind": "cuda", "arch": "sm_90a"}


def sched_matmul(M, N, K, workers, swizzle, column_major=True, bm=32, bn=32, bk=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32"),
             W: T.Tensor((T.ceildiv(M, bm), T.ceildiv(N, bn)), "int32")):
        with T.Kernel(workers, threads=128) as bid:
            a_s = T.alloc_shared((bm, bk), "float16")
            b_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            sched = T.PersistentTileScheduler(T.ceildiv(M, bm), T.ceildiv(N, bn), num_workers=workers,
                                              swizzle_size=swizzle, column_major=column_major)
            sched.init(bid)
            while sched.valid():
                bx, by = sched.m_idx, sched.n_idx
                T.clear(acc)
                for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[bx * bm, ko * bk], a_s)
                    T.copy(B[ko * bk, by * bn], b_s)
                    T.gemm(a_s, b_s, acc)
                T.copy(acc, C[bx * bm, by * bn])
                W[sched.m_idx[0], by] = sched.current_iter * 1000 + bid
                sched.next_tile()
    return main


def expected_waves(mt, nt, workers, swizzle, column_major, cluster=1):
    """TileLang's visiting order written out: tile -> current_iter * 1000 + worker."""
    rows = -(-mt // cluster)
    fast, slow = (rows, nt) if column_major else (nt, rows)
    order = []
    for panel in range(0, slow, swizzle):
        for f in range(fast):
            for s in range(panel, min(panel + swizzle, slow)):
                order.append((f, s) if column_major else (s, f))
    out = {}
    for i, t in enumerate(order):
        out[t] = (i // workers) * 1000 + i % workers
    return out


@pytest.mark.parametrize("M,N,K,workers,swizzle,colmaj", [
    (200, 330, 64, 7, 8, True),     # ragged edges, a narrower last panel (11 N tiles, panels of 8)
    (128, 160, 32, 3, 1, True),     # no swizzle: plain column-major
    (96, 224, 64, 4, 3, False),     # row-major (N fastest), panels of 3 M tiles
    (64, 64, 32, 9, 2, True),       # more workers than tiles: some never enter the loop
])
def test_every_tile_once_in_tilelangs_order_on_the_cpu_target(M, N, K, workers, swizzle, colmaj):
    k = tilelang.compile(sched_matmul(M, N, K, workers, swizzle, colmaj), target="cpu")
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    mt, nt = -(-M // 32), -(-N // 32)
    c = torch.zeros(M, N)
    w = torch.full((mt, nt), -1, dtype=torch.int32)
    k(a, b, c, w)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-2)
    exp = expected_waves(mt, nt, workers, swizzle, colmaj)
    want = torch.tensor([[exp[(i, j)] for j in range(nt)] for i in range(mt)], dtype=torch.int32)
    assert torch.equal(w, want)


@tilelang.jit(out_idx=[-1], target="cpu")
def cluster_rows(mt, nt, cluster, workers, swizzle):
    rows = -(-mt // cluster)

    @T.prim_func
    def main(W: T.Tensor((rows, nt), "int32"), O: T.Tensor((rows, nt), "int32")):
        with T.Kernel(workers, threads=32) as bid:
            sched = T.PersistentTileScheduler("s", mt, nt, workers, swizzle_size=swizzle, cluster_size=cluster)
            sched.init(bid)
            while sched.valid():
                O[sched.m_idx[0], sched.n_idx[0]] = W[sched.m_idx, sched.n_idx] + sched.current_iter * 1000 + bid
                sched.next_tile()
    return main


def test_cluster_size_runs_over_cluster_rows():
    mt, nt, cluster, workers, swizzle = 7, 5, 2, 3, 2   # 4 cluster rows (the last one half full)
    k = cluster_rows(mt, nt, cluster, workers, swizzle)
    rows = -(-mt // cluster)
    out = k(torch.zeros(rows, nt, dtype=torch.int32))
    exp = expected_waves(mt, nt, workers, swizzle, True, cluster)
    assert torch.equal(out, torch.tensor([[exp[(i, j)] for j in range(nt)] for i in range(rows)], dtype=torch.int32))


@tilelang.jit(out_idx=[-1], target="cpu")
def stateless(mt, nt, workers, swizzle):
    @T.prim_func
    def main(O: T.Tensor((mt, nt), "int32")):
        with T.Kernel(workers, threads=32) as bid:
            sched = T.PersistentTileScheduler(mt, nt, num_workers=workers, swizzle_size=swizzle, stateful=False)
            for w in range(-(-(mt * nt) // workers)):
                m, n = sched.coord(workers * w + bid)
                if workers * w + bid < mt * nt:
                    O[m, n] = w * 1000 + bid
    return main


def test_stateless_coord_decodes_the_same_order():
    out = stateless(6, 7, 4, 3)()
    exp = expected_waves(6, 7, 4, 3, True)
    assert torch.equal(out, torch.tensor([[exp[(i, j)] for j in range(7)] for i in range(6)], dtype=torch.int32))


def test_stateless_scheduler_has_no_loop_state():
    with pytest.raises(TilecraftError, match=r"stateful=False.*\.init\(\)") as e:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(4, threads=32) as bid:
                sched = T.PersistentTileScheduler(2, 2, num_workers=4, stateful=False)
                sched.init(bid)
    assert "test_persistent_tile_scheduler.py" in str(e.value)


def test_bad_swizzle_is_an_error():
    with pytest.raises(TilecraftError, match="swizzle_size must be a positive int"):
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(4, threads=32) as bid:
                T.PersistentTileScheduler(2, 2, num_workers=4, swizzle_size=0)


@tilelang.jit(out_idx=[-1], target="cpu")
def halves(N, bn):
    @T.prim_func
    def main(B: T.Tensor((8, N), "float32"), O: T.Tensor((8, N), "float32")):
        with T.Kernel(N // bn, 2, threads=32) as (by, half):
            s = T.alloc_shared((8, bn // 2), "float32")
            T.copy(B[0:8, (by * 2 + half) * bn // 2:(by * 2 + half + 1) * bn // 2], s)
            for i, j in T.Parallel(8, bn // 2):
                O[i, (by * 2 + half) * (bn // 2) + j] = s[i, j] * 3
    return main


def test_a_slice_whose_bounds_divide_exactly_has_a_static_extent():
    b = torch.randn(8, 256)
    torch.testing.assert_close(halves(256, 64)(b), b * 3)


def test_a_slice_whose_bounds_do_not_divide_is_still_refused():
    with pytest.raises(TilecraftError, match="must have a compile-time extent"):
        @T.prim_func
        def main(B: T.Tensor((8, 256), "float32")):
            with T.Kernel(4, threads=32) as bx:
                s = T.alloc_shared((8, 32), "float32")
                T.copy(B[0:8, bx * 63 // 2:(bx + 1) * 63 // 2], s)


@pytest.mark.cuda_compile
def test_scheduled_gemm_compiles_for_sm90a():
    k = tilelang.compile(sched_matmul(256, 256, 128, 5, 8), target=SM90)
    src = k.get_kernel_source()
    assert "sched_linear_idx" in src and "while" in src

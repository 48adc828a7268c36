"""TileLang's PTX-level builtins (language/ptx.py) on every target: `T.ptx_cp_async` with
`T.ptx_commit_group` / `T.ptx_wait_group` copying through shared memory, `T.fence_proxy_async` and
`T.mbarrier_arrive_expect_tx` in programs whose results are checked against torch; the thread-level
ones (`T.any_sync` / `T.all_sync` / `T.ballot`, `T.named_barrier_arrive`) compiled for sm_80 and
sm_90a with their instructions checked in the source, and refused on the CPU target at their line."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90a"}


@tilelang.jit(out_idx=[-1])
def cp_async_rows(M, N, dtype="float16"):
    vec = 16 // (2 if dtype == "float16" else 4)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((M, N), dtype)
            for i, j in T.Parallel(M, N // vec):
                T.ptx_cp_async(T.access_ptr(S[i, j * vec], "w", vec), T.access_ptr(X[i, j * vec], "r", vec), vec)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.fence_proxy_async()
            for i, j in T.Parallel(M, N):
                Y[i, j] = S[i, j] * 2
    return main


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_ptx_cp_async_copies(build, device, dtype):
    x = torch.randn(16, 64, device=device).to(getattr(torch, dtype))
    torch.testing.assert_close(build(cp_async_rows, 16, 64, dtype)(x), x * 2)


def test_ptx_cp_async_width_is_checked():
    with pytest.raises(tilelang.TilecraftError, match="cp.async moves 4, 8 or 16 bytes"):
        @T.prim_func
        def main(X: T.Tensor((64,), "float16")):
            with T.Kernel(1, threads=32) as bx:
                S = T.alloc_shared((64,), "float16")
                T.ptx_cp_async(T.access_ptr(S[0], "w", 3), T.access_ptr(X[0], "r", 3), 3)


@tilelang.jit(out_idx=[-1])
def expect_tx(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((N,), "float32")
            bar = T.alloc_barrier(128)
            T.copy(X, S)
            T.mbarrier_arrive_expect_tx(bar, N * 4)
            T.mbarrier_wait_parity(bar, 0)
            for i in T.Parallel(N):
                Y[i] = S[i] + 1
    return main


def test_mbarrier_arrive_expect_tx(build, device):
    x = torch.randn(256, device=device)
    torch.testing.assert_close(build(expect_tx, 256)(x), x + 1)


def vote_program(kind):
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "int64")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            if kind == "any":
                Y[tx] = T.any_sync(X[tx] > 1.0)
            elif kind == "all":
                Y[tx] = T.all_sync(X[tx] > -3.0)
            else:
                Y[tx] = T.ballot(X[tx] > 0.0)
    return main


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm80", "sm90a"])
@pytest.mark.parametrize("kind", ["any", "all", "ballot"])
def test_votes_compile(kind, target):
    src = tilelang.compile(vote_program(kind), out_idx=[-1], target=target).get_kernel_source()
    assert f"tc::vote_{kind}(" in src


def test_votes_are_refused_on_the_cpu_at_their_line():
    with pytest.raises(tilelang.TilecraftError, match="CPU target") as e:
        tilelang.compile(vote_program("any"), out_idx=[-1], target="cpu")
    assert "T.any_sync(X[tx] > 1.0)" in str(e.value)


def test_vote_mask_must_be_full():
    with pytest.raises(tilelang.TilecraftError, match="only the full warp mask"):
        @T.prim_func
        def main(Y: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                tx = T.get_thread_binding()
                Y[tx] = T.any_sync(tx > 3, 0xFFFF)


def named_arrive_program():
    @T.prim_func
    def main(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((256,), "float32")
            if tx < 128:
                s[tx] = X[tx] * 2
                T.named_barrier_arrive(1, 256)
            else:
                T.sync_threads(1, 256)
                Y[tx - 128] = s[tx - 128]
    return main


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm80", "sm90a"])
def test_named_barrier_arrive_compiles(target):
    src = tilelang.compile(named_arrive_program(), out_idx=[-1], target=target).get_kernel_source()
    assert "tc::named_barrier_arrive<1, 256>()" in src and "tc::named_barrier_sync<1, 256>()" in src


def test_named_barrier_arrive_checks_its_ids():
    with pytest.raises(tilelang.TilecraftError, match="the barrier id is an int in 1..15"):
        @T.prim_func
        def main(Y: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=64) as bx:
                T.named_barrier_arrive(0, 64)

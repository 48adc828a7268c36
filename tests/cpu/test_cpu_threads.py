"""The CPU target's thread-level mode (transform/cpu_threads.py, codegen/cpp_threads.py,
tilecraft_cpu_threads.h): programs written at the level of CUDA threads run there with their
blocks' threads emulated (one fiber per thread), against torch on fresh random inputs; a program
that would hang on the GPU stops with an error naming each wait; ordinary tile programs keep the
tile path unless `tc.cpu_threads` is True, which runs the CUDA lowering's per-thread code on the CPU.

The programs of tests/gpu that use these constructs (named barriers, tvm_thread_allreduce, the
lop3 gemv, warp branches, block-uniform ifs) run here through their shared definitions."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "cuda"))
sys.path.insert(0, os.path.join(HERE, "..", "language"))
sys.path.insert(0, HERE)
THIS = os.path.basename(__file__)
THREADS = {"tc.cpu_threads": True}
FIBERS = "one fiber per CUDA thread"


def _line(fn, needle: str) -> int:
    import inspect
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, t in enumerate(src) if needle in t)


# ---- shuffles, warp scans, block reductions through shared memory --------------------------------

@tilelang.jit(out_idx=[1, 2], target="cpu")
def warp_scan(N, threads):
    """Per block of `threads` elements: Y = inclusive prefix sums within each warp (shfl_up
    ladder), S[block] = the block's sum (warp sums through shared memory, one barrier, the first
    warp reduces them with shfl_down)."""
    warps = threads // 32

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), S: T.Tensor((N // threads,), "float32")):
        with T.Kernel(N // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            lane = T.get_lane_idx()
            part = T.alloc_shared((32,), "float32")  # one per warp; read by all 32 lanes
            v = T.alloc_var("float32")
            v = X[bx * threads + tx]
            for i in T.serial(5):
                up = T.shfl_up(v, 1 << i)
                if lane >= (1 << i):
                    v = v + up
            Y[bx * threads + tx] = v
            if lane == 31:
                part[tx // 32] = v
            T.sync_threads()
            if tx < 32:
                w = T.alloc_var("float32")
                w = T.if_then_else(lane < warps, part[lane], T.float32(0))
                for i in T.serial(5):
                    w = w + T.shfl_down(w, 16 >> i)
                if tx == 0:
                    S[bx] = w
    return main


@pytest.mark.parametrize("threads", [128, 256])
def test_warp_scan_and_block_sum(threads):
    n = threads * 6
    x = torch.randn(n)
    k = warp_scan(n, threads)
    assert FIBERS in k.get_kernel_source()
    y, s = k(x)
    torch.testing.assert_close(y, x.view(-1, 32).cumsum(1).view(-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s, x.view(-1, threads).sum(1), rtol=1e-5, atol=1e-4)


def test_named_barrier_prefix_sum():
    from test_named_barrier import prefix_sum_first_warps
    k = tilelang.compile(prefix_sum_first_warps(256, 64), out_idx=[-1], target="cpu")
    assert FIBERS in k.get_kernel_source()
    x = torch.randint(-1000, 1000, (256,), dtype=torch.int32)
    ref = x.clone()
    ref[:64] = torch.cumsum(x[:64], 0).to(torch.int32)
    assert torch.equal(k(x), ref)


@pytest.mark.parametrize("case", [((32, 4), "x", "sum"), ((8, 4), "y", "max"), ((16, 2), "x", "max")],
                         ids=lambda c: f"{c[0][0]}x{c[0][1]}-{c[1]}-{c[2]}")
def test_thread_allreduce(case):
    from test_lowlevel import allreduce_program
    threads, axis, op = case
    x = torch.randn(threads[1], threads[0])
    y = torch.empty_like(x)
    tilelang.compile(allreduce_program(threads, axis, op), target="cpu")(x, y)
    dim = 1 if axis == "x" else 0
    r = x.sum(dim, keepdim=True) if op == "sum" else x.amax(dim, keepdim=True)
    torch.testing.assert_close(y, r.expand_as(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", ["uint", "int"])
@pytest.mark.parametrize("threads", [(32, 4), (16, 8)], ids=["32x4", "16x8"])
def test_gemv_with_extern_decoder_and_thread_allreduce(fmt, threads):
    from test_lowlevel import fields, gemv_program
    from tilecraft.quantize.utils import interleave_weight
    N, K = 64, 512
    a = torch.randn(K, dtype=torch.float16)
    b = torch.randint(-128, 128, (N, K // 2), dtype=torch.int8)
    c = torch.empty(N, dtype=torch.float32)
    tilelang.compile(gemv_program(N, K, fmt, threads=threads), target="cpu")(a, interleave_weight(b, 4, "float16"), c)
    w = torch.from_numpy(fields(b.numpy(), fmt == "int")).float()
    torch.testing.assert_close(c, w @ a.float(), rtol=1e-4, atol=1e-2)


def test_thread_binding_with_tile_ops():
    """A program that reads the thread index and also uses tile ops (a gemm, a row reduction): the
    tile ops are spread over the threads by the CUDA lowering, the thread-level code is as written."""
    M, N, K = 64, 64, 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32"),
             R: T.Tensor((M,), "float32"), Tid: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            Tid[T.get_thread_binding()] = T.get_thread_binding() * 3
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C_f)
            T.gemm(A_s, B_s, C_f)
            T.reduce_sum(C_f, r, dim=1)
            T.copy(C_f, C)
            T.copy(r, R)
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c, r, tid = torch.empty(M, N), torch.empty(M), torch.empty(128, dtype=torch.int32)
    k = tilelang.compile(main, target="cpu")
    assert FIBERS in k.get_kernel_source()
    k(a, b, c, r, tid)
    ref = a.float() @ b.float()
    torch.testing.assert_close(c, ref, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(r, ref.sum(1), rtol=1e-3, atol=1e-2)
    assert torch.equal(tid, torch.arange(128, dtype=torch.int32) * 3)


# ---- ordinary tile programs: the tile path by default, the per-thread code with tc.cpu_threads -----

def test_tile_programs_keep_the_tile_path():
    from tilecraft.kernels import gemm
    k = tilelang.compile(gemm.matmul.fn(128, 128, 64, block_M=64, block_N=64, block_K=32, num_stages=2),
                         out_idx=[-1], target="cpu")
    assert FIBERS not in k.get_kernel_source()


@pytest.mark.parametrize("M,N,K,bm,bn,bk,stages,threads", [
    (256, 192, 128, 128, 64, 32, 2, 128), (200, 136, 96, 64, 64, 32, 3, 256)])
def test_gemm_as_cuda_threads(M, N, K, bm, bn, bk, stages, threads):
    from tilecraft.kernels import gemm
    k = tilelang.compile(gemm.matmul.fn(M, N, K, block_M=bm, block_N=bn, block_K=bk, num_stages=stages,
                                        threads=threads), out_idx=[-1], target="cpu", pass_configs=THREADS)
    assert FIBERS in k.get_kernel_source()
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    torch.testing.assert_close(k(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_softmax_and_rmsnorm_as_cuda_threads():
    from tilecraft.kernels import norm
    x = torch.randn(64, 512)
    soft = tilelang.compile(norm.softmax.fn(64, 512, dtype="float32"), out_idx=[-1], target="cpu", pass_configs=THREADS)
    torch.testing.assert_close(soft(x), torch.softmax(x, -1), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n_tiles,blocks", [(7, 3), (5, 8)])
def test_block_uniform_if_as_cuda_threads(n_tiles, blocks):
    from test_uniform_if_sync import check_guarded, guarded_tiles
    check_guarded(tilelang.compile(guarded_tiles(n_tiles, blocks), target="cpu", pass_configs=THREADS), n_tiles)


@pytest.mark.parametrize("split,threads", [(32, 96), (64, 128), (96, 128)])
def test_warp_branches_as_cuda_threads(split, threads):
    from test_warp_branches import check_split, split_at_warp
    check_split(tilelang.compile(split_at_warp(split=split, threads=threads), target="cpu", pass_configs=THREADS))


# ---- what would hang on the GPU: an error naming the waits ------------------------------------------

@tilelang.jit(out_idx=[1], target="cpu")
def divergent_barrier(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            s[tx] = X[tx]
            if tx < 64:
                T.sync_threads()
                Y[tx] = s[127 - tx]
            else:
                T.sync_threads(5, 128)
                Y[tx] = s[127 - tx]
    return main


def test_barriers_that_never_complete_are_a_deadlock_naming_them():
    line_a = _line(divergent_barrier.fn, "T.sync_threads()")
    line_b = _line(divergent_barrier.fn, "T.sync_threads(5, 128)")
    with pytest.raises(TilecraftError) as e:
        divergent_barrier(128)(torch.randn(128))
    text = str(e.value)
    assert "deadlock" in text and "block (0, 0, 0)" in text, text
    assert f"threads 0-63 wait at the block barrier (__syncthreads) at {THIS}:{line_a}" in text, text
    assert f"threads 64-127 wait at named barrier 5 (128 threads) at {THIS}:{line_b}" in text, text


@tilelang.jit(out_idx=[1], target="cpu")
def half_warp_shuffle(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            if tx % 32 < 16:
                Y[tx] = T.shfl_xor(X[tx], 1)
    return main


def test_a_shuffle_half_a_warp_reaches_is_a_deadlock_naming_it():
    line = _line(half_warp_shuffle.fn, "T.shfl_xor(X[tx], 1)")
    with pytest.raises(TilecraftError, match=rf"threads 0-15 \(warp 0\) wait for the rest of their warp at "
                                             rf"{THIS}:{line} .*16 lanes arrived"):
        half_warp_shuffle(64)(torch.randn(64))


def test_a_device_assert_in_a_thread_stops_the_kernel():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            T.device_assert(X[tx] < 100, "X is small")
            X[tx] = X[tx] + T.shfl_xor(X[tx], 1)
    k = tilelang.compile(main, target="cpu")
    x = torch.randn(64)
    y = x.clone()
    k(y)
    torch.testing.assert_close(y, x + x.view(-1, 2).flip(1).reshape(-1))
    x[5] = 1000.0
    with pytest.raises(TilecraftError, match="X is small"):
        k(x)


@tilelang.jit(out_idx=[1], target="cpu")
def flag_handoff(N, set_flag):
    """Warp 1 spins on a shared flag that warp 0 sets after filling a shared tile (a spin-wait the
    threads of a block do concurrently on the GPU); with set_flag False nobody sets it."""
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((32,), "float32")
            flag = T.alloc_shared((1,), "int32")
            if tx == 0:
                flag[0] = 0
            T.sync_threads()
            if tx < 32:
                s[tx] = X[tx] * 2
                T.sync_warp()
                if tx == 0 and set_flag:
                    flag[0] = 1
            else:
                while flag[0] == 0:
                    T.sync_warp()
                Y[tx - 32] = s[tx - 32] + 1
    return main


def test_a_spin_wait_on_shared_memory_ends():
    x = torch.randn(32)
    torch.testing.assert_close(flag_handoff(32, True)(x), x * 2 + 1)


def test_spinning_that_nobody_ends_is_a_deadlock_naming_the_loop(monkeypatch):
    """The spin limit is 8 s by default (tilecraft_cpu_threads.h); this test sets a short one
    (TILECRAFT_CPU_SPIN_SECONDS, read when the kernel library is loaded), so it does not spin 8 s."""
    monkeypatch.setenv("TILECRAFT_CPU_SPIN_SECONDS", "0.5")
    line = _line(flag_handoff.fn, "while flag[0] == 0:")
    with pytest.raises(TilecraftError, match=rf"threads \d+-\d+ spin in the while loop at {THIS}:{line} .*, "
                                             r"and for 0\.5 s no thread"):
        flag_handoff(32, False)(torch.randn(32))


def test_1024_threads_per_block():
    n = 1024 * 3
    x = torch.randn(n)
    y, s = warp_scan(n, 1024)(x)
    torch.testing.assert_close(y, x.view(-1, 32).cumsum(1).view(-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s, x.view(-1, 1024).sum(1), rtol=1e-5, atol=1e-3)


def test_swizzle_annotations_as_cuda_threads():
    """A shared tile a layout annotation swizzles is addressed through the sm80 swizzle in this mode."""
    from test_kernels import annotated_copy
    k = tilelang.compile(annotated_copy.fn(40, 64, 16, 32), out_idx=[-1], target="cpu", pass_configs=THREADS)
    assert "tc::swizzle_offset<32, 2>" in k.get_kernel_source()
    a = torch.randn(40, 64).half()
    torch.testing.assert_close(k(a), a, rtol=0, atol=0)


def test_updates_of_shared_memory_from_a_replicated_row_happen_once():
    """r (a row reduction of a gemm accumulator) is held by several threads per row; on a GPU they are
    lanes of one converged warp, so `S[i] = S[i] + r[i]` adds r once (TileLang's flashmla example does
    this with its logsum); the fibers must not add it once per copy."""
    M, N, K = 64, 64, 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), X: T.Tensor((M,), "float32"),
             Y: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            S = T.alloc_shared((M,), "float32")
            C_f = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.copy(X, S)
            T.clear(C_f)
            T.gemm(A_s, B_s, C_f)
            T.reduce_sum(C_f, r, dim=1)
            for i in T.Parallel(M):
                S[i] = S[i] + r[i]
            T.copy(S, Y)
    a, b, x = torch.randn(M, K).half(), torch.randn(K, N).half(), torch.randn(M)
    k = tilelang.compile(main, out_idx=[-1], target="cpu", pass_configs=THREADS)
    torch.testing.assert_close(k(a, b, x), x + (a.float() @ b.float()).sum(1), rtol=1e-3, atol=1e-2)

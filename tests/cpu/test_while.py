"""`while cond:` in a kernel body on every target (see conftest.py), against Python / torch: a
per-thread data-dependent loop (Collatz step counts), a block-wide loop around tile operations
(a stream-K style GEMM whose work ranges come from a T.alloc_local / T.alloc_fragment(scope="local")
counter), and the errors for what is not supported (`break`, a Python-valued or buffer-free
condition, `while ... else`)."""
from __future__ import annotations

import inspect
import math

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError


@tilelang.jit(out_idx=[-1])
def collatz(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            for i in T.Parallel(64):
                x = T.alloc_var("int32")
                steps = T.alloc_var("int32")
                x = X[bx * 64 + i]
                steps = 0
                while x != 1:
                    if x % 2 == 0:
                        x = x // 2
                    else:
                        x = 3 * x + 1
                    steps = steps + 1
                Y[bx * 64 + i] = steps
    return main


def _collatz_steps(v: int) -> int:
    s = 0
    while v != 1:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        s += 1
    return s


def test_per_thread_while_loop(build, device):
    x = torch.randint(1, 5000, (256,), dtype=torch.int32)
    y = build(collatz, 256)(x.to(device)).cpu()
    assert torch.equal(y, torch.tensor([_collatz_steps(int(v)) for v in x], dtype=torch.int32))


@tilelang.jit  # C is passed in, zeroed: an out_idx output would start uninitialised
def streamk_gemm(M, N, K, bm, bn, bk, programs):
    """Each program walks a contiguous range of (tile, k-step) iterations with a while loop; tiles
    split between programs are summed with atomics into a zeroed float32 output."""
    tiles_n = N // bn
    iters_per_tile = K // bk
    total = (M // bm) * tiles_n * iters_per_tile
    per_prog = math.ceil(total / programs)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(programs, threads=128) as pid:
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bn, bk), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            it = T.alloc_fragment((1,), "int32", "local")
            stop = T.alloc_local((1,), "int32")
            it[0] = pid * per_prog
            last = T.min((pid + 1) * per_prog, total)
            while it[0] < last:
                stop[0] = T.min(it[0] + (iters_per_tile - it[0] % iters_per_tile), last)
                tile = it[0] // iters_per_tile
                tm = tile // tiles_n
                tn = tile % tiles_n
                T.clear(acc)
                for k in T.Pipelined(stop[0] - it[0], num_stages=2):
                    T.copy(A[tm * bm, (k + it[0] % iters_per_tile) * bk], A_s)
                    T.copy(B[tn * bn, (k + it[0] % iters_per_tile) * bk], B_s)
                    T.gemm(A_s, B_s, acc, transpose_B=True)
                for i, j in T.Parallel(bm, bn):
                    T.atomic_add(C[tm * bm + i, tn * bn + j], acc[i, j])
                it[0] = stop[0]
    return main


def test_streamk_gemm_with_while(build, device):
    M, N, K = 64, 128, 256
    a = torch.randn(M, K).half()
    b = torch.randn(N, K).half()
    # 5 programs over 2*4*8 = 64 iterations: ranges of 13 that split tiles between programs
    kernel = build(streamk_gemm, M, N, K, 32, 32, 32, 5)
    c = torch.zeros(M, N, device=device)
    kernel(a.to(device), b.to(device), c)
    torch.testing.assert_close(c.cpu(), a.float() @ b.float().T, rtol=1e-3, atol=1e-3)


def _bad(kind):
    @T.prim_func
    def main(X: T.Tensor((16,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            i = T.alloc_var("int32")
            n = 4
            if kind == "python":
                while n > 0:  # err:python
                    X[0] = 1
            elif kind == "no-buffer":
                while bx < 4:  # err:no-buffer
                    X[0] = 1
            elif kind == "continue":
                while i < 4:
                    continue  # err:continue
            elif kind == "else":
                while i < 4:  # err:else
                    i = i + 1
                else:
                    X[0] = 1
    return main


@pytest.mark.parametrize("kind,match", [("python", "Python value.*never end"),
                                        ("no-buffer", "reads no buffer"),
                                        ("continue", "`continue` is not supported"),
                                        ("else", "while ... else is not supported")])
def test_unsupported_while_forms_are_clear_errors(kind, match):
    with pytest.raises(TilecraftError, match=match) as info:
        _bad(kind)
    lines, start = inspect.getsourcelines(_bad)
    line = start + next(i for i, ln in enumerate(lines) if ln.rstrip().endswith(f"# err:{kind}"))
    msg = str(info.value)
    assert "test_while.py" in msg and f"line {line}" in msg, msg


@tilelang.jit(out_idx=[-1])
def never_entered(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            while False:
                Y[0] = -1.0
            for i in T.Parallel(N):
                Y[i] = X[i] * 2
    return main


def test_while_false_is_dropped(build, device):
    x = torch.randn(32, device=device)
    torch.testing.assert_close(build(never_entered, 32)(x), x * 2)

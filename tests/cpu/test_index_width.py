"""Index arithmetic on tensors past 2^31 elements is 64-bit (ir/index_width.py), on the CPU target
against torch; the CUDA sources are checked in tests/cuda/test_index_width_compile.py.

`bx * 512 + i` was computed in `int`: at n = 2^31 + 1024 the CPU target wrote at wrapped addresses
(a segfault).  The big tests share one uint8 tensor of 2^31 + 1024 elements (2 GiB) and change it
in place (each its own prefix), then compare samples from the start, across the 2^31 boundary, the end and random places
with torch; they are marked `big_memory` (skipped with the reason when the host has less than
3.5 GiB free, or with TILECRAFT_SKIP_BIG_MEMORY=1)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T

BIG = 2 ** 31 + 1024
ODD = 2 ** 31 + 1000   # not a multiple of the tile: the last tile copy is partial


def add_one_symbolic():
    n = T.symbolic("n", "int64")

    @T.prim_func
    def main(A: T.Tensor((n,), "uint8")):
        with T.Kernel(T.ceildiv(n, 512), threads=128) as bx:
            for i in T.Parallel(512):
                g = bx * 512 + i                  # a let: its int value wraps, the address must not
                if g < n:
                    A[g] = A[g] + T.uint8(3)
    return main


def add_one_static_tiles(N=ODD, tile=1024):
    @T.prim_func
    def main(A: T.Tensor((N,), "uint8")):
        with T.Kernel(T.ceildiv(N, tile), threads=128) as bx:
            S = T.alloc_shared((tile,), "uint8")
            T.copy(A[bx * tile], S)               # a guarded tile copy (the last one is partial)
            for i in T.Parallel(tile):
                S[i] = S[i] + T.uint8(5)
            T.copy(S, A[bx * tile])
    return main


def _samples(n: int) -> torch.Tensor:
    edges = [torch.arange(0, 4096), torch.arange(2 ** 31 - 4096, 2 ** 31 + 512), torch.arange(n - 4096, n)]
    return torch.cat(edges + [torch.randint(0, n, (100_000,))])


def _random_big(n: int) -> torch.Tensor:
    """n random bytes, quickly: a random block of a length prime to 2^32 repeated (an address
    wrapped by 2^32 lands on a different byte of the block)."""
    block = torch.randint(0, 256, (1_000_003,), dtype=torch.uint8)
    a = torch.empty(n, dtype=torch.uint8)
    for start in range(0, n, block.numel()):
        chunk = a[start:start + block.numel()]
        chunk.copy_(block[:chunk.numel()])
    return a


@pytest.fixture(scope="module")
def big_bytes():
    """One random 2^31 + 1024-byte tensor for both big tests (each takes a prefix and samples it right before
    its kernel): filled and first touched once -- on this VM the first touch of 2 GiB costs ~8-15 CPU-s."""
    return _random_big(BIG)


def _run_in_place(kernel, add: int, n: int, big: torch.Tensor):
    a = big[:n]                    # contiguous, at the buffer's start: the kernel's tensor of n elements
    where = _samples(n)
    before = a[where].clone()
    kernel(a)
    want = (before.int() + add).remainder(256).to(torch.uint8)
    got = a[where]
    bad = (got != want).nonzero()
    assert bad.numel() == 0, f"{bad.numel()} wrong elements, first at index {int(where[bad[0, 0]])}"


@pytest.mark.big_memory
def test_int64_symbolic_extent_past_2_31_elements(big_bytes):
    _run_in_place(tilelang.compile(add_one_symbolic(), target="cpu"), 3, BIG, big_bytes)


@pytest.mark.big_memory
def test_static_shape_past_2_31_elements_through_shared_tiles(big_bytes):
    _run_in_place(tilelang.compile(add_one_static_tiles(), target="cpu"), 5, ODD, big_bytes)


def test_small_int64_extent_runs_the_same_kernel():
    k = tilelang.compile(add_one_symbolic(), target="cpu")
    a = torch.randint(0, 256, (5000,), dtype=torch.uint8)
    want = (a.int() + 3).remainder(256).to(torch.uint8)
    k(a)
    assert torch.equal(a, want)


def test_cpu_source_uses_64_bit_index_arithmetic_only_where_needed():
    src = tilelang.compile(add_one_symbolic(), target="cpu").get_kernel_source()
    assert "A[((((int64_t)(bx)) * 512LL) + ((int64_t)(i)))]" in src
    small = tilelang.compile(add_one_static_tiles(N=4096), target="cpu").get_kernel_source()
    assert "int64_t)(bx" not in small and "(bx * 1024)" in small


def serial_over_int64(n=None):
    n = T.symbolic("n", "int64")

    @T.prim_func
    def main(A: T.Tensor((n,), "uint8")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(n):
                A[i] = A[i] + T.uint8(1)
    return main


def test_a_loop_over_an_int64_extent_counts_in_int64():
    k = tilelang.compile(serial_over_int64(), target="cpu")
    assert "for (int64_t i = 0; i < n; ++i)" in k.get_kernel_source()
    a = torch.randint(0, 256, (3000,), dtype=torch.uint8)
    want = (a.int() + 1).remainder(256).to(torch.uint8)
    k(a)
    assert torch.equal(a, want)

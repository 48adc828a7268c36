"""`T.rng_init` / `T.rng_rand` on every target (see conftest.py): Philox4x32-10 in cuRAND's stream
layout, against a pure-Python Philox written from the published algorithm and checked on the
Random123 known-answer vector (counter 0, key 0).  The layout is the one the corpus's rand example
compares with Triton's `randint4x`: word i of stream (seed, 0) is word i % 4 of block i // 4.
The GPU param runs the same kernels (unverified on hardware when written)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

MASK = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & MASK, (k1 + 0xBB67AE85) & MASK
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK, p1 & MASK, ((p0 >> 32) ^ c3 ^ k1) & MASK, p0 & MASK
    return [c0, c1, c2, c3]


def stream(seed, seq, off, n):
    """What curand_init(seed, seq, off) + n x curand() return."""
    out = []
    for i in range(off, off + n):
        blk = i // 4
        ctr = [blk & MASK, (blk >> 32) & MASK, seq & MASK, (seq >> 32) & MASK]
        out.append(philox4x32_10(ctr, [seed & MASK, (seed >> 32) & MASK])[i % 4])
    return out


def test_reference_matches_the_random123_known_answer():
    assert philox4x32_10([0, 0, 0, 0], [0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


@tilelang.jit(out_idx=[-1])
def rand_blocks(M, seed, seq, per_block):
    @T.prim_func
    def main(A: T.Tensor((M,), "uint32")):
        with T.Kernel(T.ceildiv(M, per_block), threads=1) as bx:
            T.rng_init(seed, seq, bx * per_block)
            for j in T.Parallel(per_block):
                if bx * per_block + j < M:
                    A[bx * per_block + j] = T.rng_rand()
    return main


@pytest.mark.parametrize("M,seed,seq,per_block", [(1024, 42, 0, 128), (300, 123, 0, 128),
                                                  (256, 2 ** 40 + 7, 3, 32), (96, 0, 0, 6)])
def test_rand_streams_match_philox(build, device, M, seed, seq, per_block):
    a = build(rand_blocks, M, seed, seq, per_block)().cpu()
    ref = []
    for b in range(0, M, per_block):
        ref += stream(seed, seq, b, min(per_block, M - b))
    assert a.to(torch.int64).tolist() == ref  # offsets that are not multiples of 4 included (per_block=6)


@tilelang.jit(out_idx=[-1])
def uniform(M, seed):
    @T.prim_func
    def main(U: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, 64), threads=1) as bx:
            T.rng_init(seed, bx, 0)
            for j in T.Parallel(64):
                U[bx * 64 + j] = T.cast(T.rng_rand() >> 8, "float32") * (1.0 / (1 << 24))
    return main


def test_uniform_draws_look_uniform(build, device):
    u = build(uniform, 1 << 14, 7)().cpu()
    assert 0 <= u.min() and u.max() < 1
    assert abs(u.mean().item() - 0.5) < 0.01 and abs(u.var().item() - 1 / 12) < 0.005
    ref = [(w >> 8) / (1 << 24) for w in stream(7, 3, 0, 64)]
    torch.testing.assert_close(u[3 * 64:4 * 64], torch.tensor(ref), rtol=0, atol=0)


def test_rand_before_init_is_an_error():
    with pytest.raises(TilecraftError, match=r"T.rng_rand\(\) before T.rng_init"):
        @T.prim_func
        def main(A: T.Tensor((16,), "uint32")):
            with T.Kernel(1, threads=16) as bx:
                for j in T.Parallel(16):
                    A[j] = T.rng_rand()

"""Tile work under a block-uniform `if` (a persistent kernel's `if tile < n:`) on the GPU against
torch, repeated so that a missing barrier shows (compile-only twin and CPU reference:
tests/cuda/test_uniform_if_sync.py).  Before the fix these raced: no barrier between the copies
into shared memory and the gemm, nor inside the cross-warp reductions."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_uniform_if_sync import check_guarded, check_mla, guarded_tiles, mla_persistent  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n_tiles,blocks", [(7, 3), (16, 16), (5, 8)])
def test_guarded_tiles_on_gpu(n_tiles, blocks):
    k = tilelang.compile(guarded_tiles(n_tiles, blocks), target="cuda")
    for _ in range(10):
        check_guarded(k, n_tiles, device="cuda")


@pytest.mark.parametrize("batch,heads,seqlen,dim,blocks", [(4, 128, 512, 256, 3), (3, 64, 320, 128, 2)])
def test_mla_persistent_on_gpu(batch, heads, seqlen, dim, blocks):
    k = tilelang.compile(mla_persistent(batch, heads, seqlen, dim, 64, 64, 64, blocks=blocks), out_idx=[-1],
                         target="cuda", pass_configs={"tc.remapped_fragment_reads": True})
    for _ in range(5):
        check_mla(k, batch, heads, seqlen, dim, 64, device="cuda")

"""Grouped GEMM for MoE (tilecraft.kernels.grouped_gemm) on the CPU target against the torch loop:
groups of ragged sizes (one empty, one smaller than a tile, one spanning several tiles), B as [G, K, N]
and as [G, N, K], N and K not multiples of the tiles; rows are written exactly once (C starts as NaN)."""
from __future__ import annotations

import pytest
import torch

from tilecraft.kernels import grouped_gemm as GG
from tilecraft.target import default_target


@pytest.mark.parametrize("trans_B", [False, True])
def test_grouped_gemm_ragged_groups(trans_B):
    sizes = [70, 0, 5, 33, 64]
    groups, N, K = len(sizes), 72, 40
    offsets = torch.tensor([0] + torch.tensor(sizes).cumsum(0).tolist(), dtype=torch.int32)
    a = torch.randn(int(offsets[-1]), K).half()
    b = torch.randn(groups, N, K).half() if trans_B else torch.randn(groups, K, N).half()
    assert GG.tile_offsets(offsets, 32).tolist() == [0, 3, 3, 4, 6, 8]
    with default_target("cpu"):
        kern = GG.grouped_matmul(a.shape[0], N, K, groups, block_M=32, block_N=64, block_K=32, trans_B=trans_B)
    c = torch.full((a.shape[0], N), float("nan")).half()
    kern(a, b, offsets, GG.tile_offsets(offsets, 32), c)
    torch.testing.assert_close(c.float(), GG.ref_grouped_gemm(a, b, offsets, trans_B), rtol=2e-3, atol=2e-2)


def test_grouped_gemm_helper():
    offsets = torch.tensor([0, 10, 90, 100], dtype=torch.int32)
    a, b = torch.randn(100, 64).half(), torch.randn(3, 64, 96).half()
    with default_target("cpu"):
        c = GG.grouped_gemm(a, b, offsets, block_M=64, block_N=64, block_K=32)
    torch.testing.assert_close(c.float(), GG.ref_grouped_gemm(a, b, offsets), rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("sizes", [[256, 100, 128], [130, 0, 1, 127]])
def test_grouped_gemm_cuda_lowering_on_the_cpu_writes_each_row_once(sizes):
    """The CUDA lowering's epilogue (full tiles by 16-byte copies from the padded shared tile, a group's last
    tile by guarded element stores) run per thread on the CPU (tc.cpu_threads), N past the last tile."""
    groups, N, K = len(sizes), 136, 64
    offsets = torch.tensor([0] + torch.tensor(sizes).cumsum(0).tolist(), dtype=torch.int32)
    a = torch.randn(int(offsets[-1]), K).half()
    b = torch.randn(groups, N, K).half()
    fn = GG.grouped_matmul.fn(a.shape[0], N, K, groups, block_M=64, block_N=64, block_K=32, num_stages=2,
                              threads=128, trans_B=True)
    import tilecraft
    kern = tilecraft.compile(fn, target="cpu", pass_configs={"tc.cpu_threads": True})
    c = torch.full((a.shape[0], N), float("nan")).half()
    kern(a, b, offsets, GG.tile_offsets(offsets, 64), c)
    torch.testing.assert_close(c.float(), GG.ref_grouped_gemm(a, b, offsets, True), rtol=2e-3, atol=2e-2)

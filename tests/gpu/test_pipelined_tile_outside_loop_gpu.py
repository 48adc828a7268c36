"""A pipelined loop's shared tile read after the loop, on the GPU (sm_80 code and the sm_90a default),
against torch with fresh random inputs: A's last k-tile comes out exactly, and the GEMM is unchanged.
Compile-only twin: tests/cuda/test_pipelined_tile_outside_loop.py."""
from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))
import tilecraft as tilelang  # noqa: E402
from test_pipelined_tile_outside_loop import last_tile_program, reference  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("M,N,K,stages", [(1024, 1024, 512, 3), (200, 300, 200, 2), (512, 512, 448, 4)])
@pytest.mark.parametrize("hopper", [False, True], ids=["sm80-code", "sm90a"])
def test_last_k_tile_matches_torch(M, N, K, stages, hopper):
    major, minor = torch.cuda.get_device_capability()
    if hopper and (major, minor) != (9, 0):
        pytest.skip("the sm_90a path needs an sm_90a GPU")
    arch = f"sm_{major}{minor}" + ("a" if hopper else "")
    k = tilelang.compile(last_tile_program(M, N, K, stages), out_idx=[2, 3], target={"kind": "cuda", "arch": arch})
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c, d = k(a, b)
    ref_c, ref_d = reference(a.cpu(), b.cpu(), K)
    assert torch.equal(d.cpu(), ref_d)
    assert ((c.float().cpu() - ref_c.float()).norm() / ref_c.float().norm()).item() < 2e-3

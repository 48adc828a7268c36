"""One shared tile read by a wgmma gemm and by an mma.sync gemm of the same kernel (TileLang's
flash-attention backward: `q` feeds Q·Kᵀ on wgmma and dK = dSᵀ·Q, whose A fragment was not in the
wgmma layout).  The tile is laid out for wgmma; the mma.sync gemm must read it with that layout (the
sm80 swizzle's bytes for rows up to 128 bytes) -- it read it unswizzled and returned a wrong dK on the
H200 (found by the corpus run, 2026-11-30).  Rows over 128 bytes would be stored in column panels that
mma.sync cannot read, so there every reader of the tile takes mma.sync.  Compile-only here (the
flag the mma.sync gemm is given, the plans) plus the CPU reference; the GPU run against torch is
tests/gpu/test_mixed_gemm_paths_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

SM90 = {"kind": "cuda", "arch": "sm_90a"}


def mixed_paths(M=64, N=64, K=64, two_nests=True):
    """C = A·B on wgmma; E = (C * d[j]) · B with the scaled product as a register A operand.  Built
    in two element-wise nests, the product is not a plain element-wise image of C, which keeps that
    gemm on mma.sync -- both gemms read the shared B tile.  In one nest (FlashAttention backward's
    dS) it stays on wgmma, A from registers."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), D: T.Tensor((N,), "float32"),
             C: T.Tensor((M, N), "float32"), E: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((K, N), "float16")
            d_s = T.alloc_shared((N,), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            p = T.alloc_fragment((M, N), "float16")
            acc2 = T.alloc_fragment((M, N), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(D, d_s)
            T.clear(acc)
            T.gemm(a_s, b_s, acc)
            if two_nests:
                for i, j in T.Parallel(M, N):
                    p[i, j] = acc[i, j]
                for i, j in T.Parallel(M, N):
                    p[i, j] = p[i, j] * d_s[j]
            else:
                for i, j in T.Parallel(M, N):
                    p[i, j] = acc[i, j] * d_s[j]
            T.clear(acc2)
            T.gemm(p, b_s, acc2)
            T.copy(acc, C)
            T.copy(acc2, E)
    return main


def reference(a, b, d, two_nests=True):
    """C, and E as the program computes it: in two nests P is rounded to half twice (C, then C * d)."""
    c = a.float() @ b.float()
    p = (c.half().float() * d).half() if two_nests else (c * d).half()
    return c, p.float() @ b.float()


def test_mixed_paths_on_the_cpu_target():
    a, b, d = torch.randn(64, 64).half(), torch.randn(64, 64).half(), torch.rand(64)
    c, e = tilelang.compile(mixed_paths(), out_idx=[3, 4], target="cpu")(a, b, d)
    rc, re = reference(a, b, d)
    torch.testing.assert_close(c, rc, rtol=1e-3, atol=1e-2)
    torch.testing.assert_close(e, re, rtol=1e-2, atol=5e-2)


@pytest.mark.cuda_compile
def test_mma_sync_gemm_reads_the_wgmma_tile_swizzled():
    k = tilelang.compile(mixed_paths(), out_idx=[3, 4], target=SM90)
    plan = k.get_plan()
    assert "on wgmma" in plan and "on mma.sync" in plan, plan
    src = k.get_kernel_source()
    rs = [line for line in src.splitlines() if "tc::gemm_rs<" in line]
    assert rs and "false, 1, tc::half_t>" in rs[0], rs  # SWZ_B = 1: the bytes wgmma's layout put there


@pytest.mark.cuda_compile
def test_an_elementwise_image_of_an_accumulator_feeds_wgmma_from_registers():
    plan = tilelang.compile(mixed_paths(two_nests=False), out_idx=[3, 4], target=SM90).get_plan()
    assert "on mma.sync" not in plan and "A from registers" in plan, plan


def test_one_nest_form_on_the_cpu_target():
    a, b, d = torch.randn(64, 64).half(), torch.randn(64, 64).half(), torch.rand(64)
    c, e = tilelang.compile(mixed_paths(two_nests=False), out_idx=[3, 4], target="cpu")(a, b, d)
    rc, re = reference(a, b, d, two_nests=False)
    torch.testing.assert_close(e, re, rtol=1e-2, atol=5e-2)


@pytest.mark.cuda_compile
def test_a_panel_stored_tile_keeps_every_reader_on_mma_sync():
    # rows of 128 halves (256 bytes) would be stored in column panels for wgmma, which mma.sync cannot
    # read: both gemms of the tile take mma.sync (the plan says why) and nothing is refused
    k = tilelang.compile(mixed_paths(N=128, K=128), out_idx=[3, 4], target=SM90)
    plan = k.get_plan()
    assert "on wgmma" not in plan and plan.count("on mma.sync") == 2 and "column panels" in plan, plan
    assert "swizzle_offset_sm90" not in k.get_kernel_source()


def test_the_panel_case_on_the_cpu_target():
    a, b, d = torch.randn(64, 128).half(), torch.randn(128, 128).half(), torch.rand(128)
    c, e = tilelang.compile(mixed_paths(N=128, K=128), out_idx=[3, 4], target="cpu")(a, b, d)
    rc, re = reference(a, b, d)
    torch.testing.assert_close(c, rc, rtol=1e-3, atol=5e-2)
    torch.testing.assert_close(e, re, rtol=1e-2, atol=1e-1)

"""A shared tile a T.Pipelined loop fills, used outside the loop (pipeline_copies.visit_Seq).  The loop's
tile becomes S staged copies; statements after the loop read the stage of the loop's last iteration
(which still holds the last k-tile: refills stop S-1 tiles before the end), statements before it stage 0.
Before this, such a program failed to compile for CUDA (an undeclared `A_s_1`).  Checked here: it compiles
for sm_80 and sm_90a, reads the right stage, and the program's result on the CPU target (the reference
semantics).  The GPU run is tests/gpu/test_pipelined_tile_outside_loop_gpu.py."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tilecraft as tilelang  # noqa: E402
import tilecraft.language as T  # noqa: E402


def last_tile_program(M, N, K, stages=3, before=False):
    """The 128x256x64 GEMM that also copies A's last k-tile out of its shared tile after the loop
    (and, with `before`, zeroes that tile before the loop)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16"),
             D: T.Tensor((M, 64), "float16")):
        with T.Kernel(T.ceildiv(N, 256), T.ceildiv(M, 128), threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 256), "float16")
            C_f = T.alloc_fragment((128, 256), "float32")
            if before:
                T.clear(A_s)
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, 64), num_stages=stages):
                T.copy(A[by * 128, ko * 64], A_s)
                T.copy(B[ko * 64, bx * 256], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 128, bx * 256])
            T.copy(A_s, D[by * 128, 0])
    return main


def reference(a, b, K):
    last = (K - 1) // 64 * 64
    d = torch.zeros(a.shape[0], 64, dtype=a.dtype)
    d[:, :K - last] = a[:, last:K]
    return (a.float() @ b.float()).to(a.dtype), d


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("before", [False, True])
def test_compiles_and_reads_the_last_iterations_stage(arch, before):
    k = tilelang.compile(last_tile_program(1024, 1024, 512, before=before), out_idx=[2, 3],
                         target={"kind": "cuda", "arch": arch})
    line = next(ln for ln in k.get_kernel_source().splitlines() if "(&D[" in ln)
    assert "&A_s[8192 + " in line, line   # 8 k-tiles over 3 stages: the last is stage 1 (128 x 64 halves each)


@pytest.mark.parametrize("M,N,K", [(256, 256, 512), (200, 300, 200)])
def test_reference_semantics_on_the_cpu_target(M, N, K):
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c, d = tilelang.compile(last_tile_program(M, N, K), out_idx=[2, 3], target="cpu")(a, b)
    ref_c, ref_d = reference(a, b, K)
    assert torch.allclose(c.float(), ref_c.float(), rtol=2e-2, atol=2e-2 * ref_c.float().abs().max().item())
    assert torch.equal(d, ref_d)

"""A fragment read at a uniform column offset inside a smaller `T.Parallel` loop
(`x_frag[i, jj * 4 + j]` in `for i, j in T.Parallel(rows, 4)`, jj a serial loop variable).

The shape of TileLang's mHC pre-block example: a squared-sum in column windows of a tile that
is also the register operand of a gemm.  CPU target against torch; sm_80 and sm_90a compile it.
GPU run: tests/gpu/test_window_reads_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


def sqrsum_gemm(tokens, hidden, n_out=24, token_block=32, hidden_block=256, threads=128):
    @T.prim_func
    def main(x: T.Tensor((tokens, hidden), "bfloat16"), fn: T.Tensor((n_out, hidden), "float32"),
             out: T.Tensor((tokens, n_out), "float32"), sqrsum: T.Tensor((tokens,), "float32")):
        with T.Kernel(T.ceildiv(tokens, token_block), threads=threads) as px:
            out_frag = T.alloc_fragment((token_block, 32), "float32")
            sqrsum_part = T.alloc_fragment((token_block, 4), "float32")
            T.clear(out_frag)
            T.clear(sqrsum_part)
            for pz in T.Pipelined(hidden // hidden_block, num_stages=2):
                x_smem_16 = T.alloc_shared((token_block, hidden_block), "bfloat16")
                fn_smem = T.alloc_shared((32, hidden_block), "float32")
                T.copy(x[px * token_block, pz * hidden_block], x_smem_16)
                T.copy(fn[0, pz * hidden_block], fn_smem)
                x_frag_16 = T.alloc_fragment((token_block, hidden_block), "bfloat16")
                T.copy(x_smem_16, x_frag_16)
                x_frag = T.alloc_fragment((token_block, hidden_block), "float32")
                T.copy(x_frag_16, x_frag)
                for jj in T.serial(hidden_block // 4):
                    for i, j in T.Parallel(token_block, 4):
                        sqrsum_part[i, j] += x_frag[i, jj * 4 + j] * x_frag[i, jj * 4 + j]
                T.gemm(x_frag, fn_smem, out_frag, transpose_A=False, transpose_B=True, clear_accum=False)
            sqrsum_l = T.alloc_fragment(token_block, "float32")
            T.reduce_sum(sqrsum_part, sqrsum_l)
            for i in T.Parallel(token_block):
                sqrsum[px * token_block + i] = sqrsum_l[i]
            for i, j in T.Parallel(token_block, 32):
                if j < n_out:
                    out[px * token_block + i, j] = out_frag[i, j]
    return main


def check(kernel, tokens, hidden, n_out, device):
    x = torch.randn(tokens, hidden).bfloat16()
    fn = torch.randn(n_out, hidden)
    out, sq = kernel(x.to(device), fn.to(device))
    xf = x.float()
    torch.testing.assert_close(sq.cpu(), (xf * xf).sum(-1), atol=1e-2, rtol=1e-3)
    torch.testing.assert_close(out.cpu(), xf @ fn.T, atol=5e-2, rtol=1e-2)


def test_window_reads_on_cpu_match_torch():
    k = tilelang.compile(sqrsum_gemm(64, 512, token_block=16, hidden_block=128), out_idx=[2, 3], target="cpu")
    check(k, 64, 512, 24, "cpu")


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_window_reads_compile(arch):
    k = tilelang.compile(sqrsum_gemm(128, 1024), out_idx=[2, 3], target={"kind": "cuda", "arch": arch},
                         pass_configs={"tc.remapped_fragment_reads": True})
    assert "sqrsum_part" in k.get_kernel_source()


def test_window_dims_reads_the_forms():
    """ir.semantics.window_dims: `u * c + v` in either order is a window; a loop variable scaled
    or two loop variables are not."""
    from tilecraft.ir import Var, binary, const
    from tilecraft.ir.semantics import window_dims
    i, j, jj = Var("i"), Var("j"), Var("jj")
    assert window_dims((i, binary("+", binary("*", jj, const(4)), j)), (i, j))[1][::2] == (1, 4)
    assert window_dims((i, binary("+", j, binary("*", const(8), jj))), (i, j))[1][::2] == (1, 8)
    assert window_dims((i, binary("+", binary("*", j, const(4)), i)), (i, j)) is None
    assert window_dims((i, j), (i, j)) is None

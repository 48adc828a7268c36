"""`fuse_gemm_k_loops_cpu`, IR in / IR out: a k-loop that only stages a gemm's operands becomes one gemm
over the whole k range of the global tensors, under a bounds test where the range may pass their end,
with the loop as the other branch.  The bits of the result: tests/cpu/test_fuse_gemm_k_loops.py."""
from __future__ import annotations

import pytest

import tilecraft.language as T
from tilecraft.ir import Copy, For, Gemm, If, collect
from tilecraft.target import Target
from tilecraft.transform.fuse_gemm_k_loops_cpu import fuse_gemm_k_loops_cpu
from tilecraft.transform.pipeline import PassContext

CPU = PassContext(Target.resolve("cpu"))


def gemm(M, N, K, bm, bn, bk, dtype="bfloat16", extra=False, swizzle=False):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            if swizzle:   # a GPU layout request names the staged tiles: nothing on the CPU
                T.annotate_layout({A_s: T.make_swizzled_layout(A_s), B_s: T.make_swizzled_layout(B_s)})
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
                if extra:   # anything more in the loop keeps it
                    acc[0, 0] = acc[0, 0] + 1.0
            T.copy(acc, C[by * bm, bx * bn])
    return main


def nodes(func, cls):
    return collect(func.body, lambda n: isinstance(n, cls))


@pytest.mark.parametrize("swizzle", [False, True])
def test_a_staging_loop_becomes_one_gemm_over_k(swizzle):
    out = fuse_gemm_k_loops_cpu(gemm(256, 256, 512, 128, 128, 32, swizzle=swizzle), CPU)
    assert not nodes(out, For) and not nodes(out, If)   # the blocks' ranges provably inside: no test, no loop
    copies, gemms = nodes(out, Copy), nodes(out, Gemm)
    assert len(gemms) == 1 and len(copies) == 1   # the epilogue's copy only
    g = gemms[0]
    assert (g.a.buffer.name, g.a.extents, g.b.buffer.name, g.b.extents) == ("A", (128, 512), "B", (512, 128))
    assert g.mnk == (128, 128, 512)


def test_ragged_edges_keep_the_loop_behind_a_bounds_test():
    out = fuse_gemm_k_loops_cpu(gemm(200, 256, 512, 128, 128, 32), CPU)
    (test,) = nodes(out, If)
    assert isinstance(test.then, Gemm) and isinstance(test.orelse, For)
    assert "200" in repr(test.cond)


def test_loops_that_do_more_or_split_blocks_stay():
    for func in (gemm(256, 256, 512, 128, 128, 32, extra=True),   # a store beside the gemm
                 gemm(256, 256, 512, 128, 128, 16)):              # bf16's blocks of 32 k across two calls
        out = fuse_gemm_k_loops_cpu(func, CPU)
        assert out.body is func.body
    out = fuse_gemm_k_loops_cpu(gemm(256, 256, 512, 128, 128, 16, dtype="float16"), CPU)
    assert not nodes(out, For)   # float16: k order throughout, any split composes


def test_float32_micro_kernel_calls_take_at_most_512_k():
    """float16 x float16: 2048 k in 64 tiles of 32 become four calls of 512 (a loop over the chunks); bf16 one."""
    out = fuse_gemm_k_loops_cpu(gemm(256, 256, 2048, 128, 128, 32, dtype="float16"), CPU)
    (chunks,) = nodes(out, For)
    (g,) = nodes(out, Gemm)
    assert chunks.extent.value == 4 and g.mnk == (128, 128, 512)
    out = fuse_gemm_k_loops_cpu(gemm(256, 256, 2048, 128, 128, 32), CPU)
    assert not nodes(out, For) and nodes(out, Gemm)[0].mnk == (128, 128, 2048)

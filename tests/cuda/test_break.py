"""`break` in a kernel body leaves the innermost serial loop (T.serial, range, T.unroll, while), as
TileLang's top-k selector uses it; it is refused in T.Parallel and T.Pipelined and outside loops.
The CPU target runs it against torch; CUDA compiles it (GPU run: tests/gpu/test_break_gpu.py)."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError


def first_above(R=64, C=100):
    """Out[r] = the first column c of X[r] with X[r, c] > 1 (C when none): a serial scan that stops."""
    @T.prim_func
    def main(X: T.Tensor((R, C), "float32"), Out: T.Tensor((R,), "int32")):
        with T.Kernel(R // 32, threads=32) as bx:
            for i in T.Parallel(32):
                found = T.alloc_var("int32")
                found = C
                for c in T.serial(C):
                    if X[bx * 32 + i, c] > 1.0:
                        found = c
                        break
                Out[bx * 32 + i] = found
    return main


def _check(k, R=64, C=100, device="cpu"):
    x = torch.randn(R, C, device=device)
    above = x > 1.0
    ref = torch.where(above.any(1), above.int().argmax(1), torch.full((R,), C, device=device)).int()
    assert torch.equal(k(x), ref)


def test_break_on_the_cpu_target():
    _check(tilelang.compile(first_above(), out_idx=[1], target="cpu"))


@pytest.mark.cuda_compile
def test_break_compiles_for_cuda():
    src = tilelang.compile(first_above(), out_idx=[1], target={"kind": "cuda", "arch": "sm_90a"}).get_kernel_source()
    assert "break;" in src


@pytest.mark.parametrize("loop,msg", [("T.Parallel(8)", "cannot leave T.Parallel"),
                                      ("T.Pipelined(8, num_stages=2)", "cannot leave T.Pipelined")])
def test_break_refused_where_it_has_no_meaning(loop, msg):
    src = f'''
import tilecraft.language as T
@T.prim_func
def main(X: T.Tensor((8,), "float32")):
    with T.Kernel(1, threads=8) as bx:
        for i in {loop}:
            if X[i] > 0:
                break
'''
    import linecache
    name = f"<break-test-{loop[:12]}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    with pytest.raises(TilecraftError, match=msg):
        exec(compile(src, name, "exec"), {})

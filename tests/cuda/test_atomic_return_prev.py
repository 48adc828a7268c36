"""`T.atomic_add/max/min(dst, v, return_prev=True)`: the value the element held before the update
(TileLang's top-k selector claims output slots this way).  A stream compaction: each block counts
its kept elements into a shared counter (its slot in the block), then claims a range of the output
with one global atomic; the kept values, sorted, must equal torch's (the order between blocks is
the scheduler's).  CPU target against torch; CUDA compiles for sm_80 / sm_90a; the GPU run is
tests/gpu/test_atomic_return_prev_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError


def compact_positive(N=1000, threads=128):
    """Each kept element claims an output slot with one global atomic; Prev[i] records what
    T.atomic_max returned for a per-block running maximum (so it never exceeds the final one)."""
    nb = (N + threads - 1) // threads

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Out: T.Tensor((N,), "float32"), Count: T.Tensor((1,), "int32"),
             Mx: T.Tensor((nb,), "float32"), Prev: T.Tensor((N,), "float32")):
        with T.Kernel(nb, threads=threads) as bx:
            for i in T.Parallel(threads):
                if bx * threads + i < N:
                    Prev[bx * threads + i] = T.atomic_max(Mx[bx], X[bx * threads + i], return_prev=True)
                    if X[bx * threads + i] > 0:
                        slot = T.atomic_add(Count[0], 1, return_prev=True)
                        Out[slot] = X[bx * threads + i]
    return main


def _check(k, N=1000, device="cpu"):
    x = torch.randn(N, device=device)
    out = torch.full((N,), -7.0, device=device)
    count = torch.zeros(1, dtype=torch.int32, device=device)
    nb = (N + 127) // 128
    mx = torch.full((nb,), -1e30, device=device)
    prev = torch.empty(N, device=device)
    k(x, out, count, mx, prev)
    kept = x[x > 0]
    assert int(count.item()) == kept.numel()
    torch.testing.assert_close(out[:kept.numel()].sort().values, kept.sort().values)
    assert bool((out[kept.numel():] == -7.0).all()), "no slot past the count was written"
    pad = torch.full((nb * 128 - N,), -1e30, device=device)
    blocks = torch.cat([x, pad]).view(nb, 128)
    torch.testing.assert_close(mx, blocks.max(1).values)
    # each previous value is one the block's maximum passed through: below or equal to the final
    # maximum, and -1e30 (the start) exactly once per block
    pb = torch.cat([prev, pad]).view(nb, 128)
    assert bool((pb <= mx[:, None]).all())
    assert bool(((torch.cat([prev, torch.zeros(nb * 128 - N, device=device)]).view(nb, 128) == -1e30).sum(1) == 1).all())


def test_compaction_on_the_cpu_target():
    _check(tilelang.compile(compact_positive(), target="cpu"))


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_compaction_compiles_for_cuda(arch):
    src = tilelang.compile(compact_positive(), target={"kind": "cuda", "arch": arch}).get_kernel_source()
    assert "= tc::atomic_add(" in src


def test_return_prev_needs_one_element():
    with pytest.raises(TilecraftError, match="updates one element") as e:
        @T.prim_func
        def main(X: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                s = T.alloc_shared((64,), "float32")
                v = T.atomic_add(s, X, return_prev=True)
    assert "test_atomic_return_prev.py" in str(e.value)

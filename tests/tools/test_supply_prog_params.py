"""`supply_prog` receives TileLang's parameter records: `.shape`, and `.dtype` a tilelang dtype
(`param.dtype.as_torch()` is the torch dtype, as TileLang's current examples call it); the
profiler's own records (`kernel.params`) keep torch dtypes.  A real autotune of a small CPU kernel
whose inputs come from such a supply function, checked against its reference."""
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.autotuner import autotune
from tilecraft.autotuner.tuner import supply_params

SEEN = []


def supply(params):
    out = []
    for p in params:
        SEEN.append((tuple(p.shape), p.dtype))
        out.append(torch.full([int(s) for s in p.shape], 3.0, dtype=p.dtype.as_torch()))
    return out


@autotune(configs=[{"blk": 32}, {"blk": 64}], warmup=1, rep=2, supply_prog=supply,
          ref_prog=lambda a: a.float() * 2)
@tilelang.jit(out_idx=[-1], target="cpu")
def double(N, blk=32):
    @T.prim_func
    def main(A: T.Tensor((N,), "float16"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, blk), threads=32) as bx:
            for i in T.Parallel(blk):
                B[bx * blk + i] = A[bx * blk + i] * 2
    return main


def test_supply_prog_sees_tilelang_dtypes(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    SEEN.clear()
    kernel = double(256)
    assert SEEN and all(shape == (256,) and str(d) == "float16" for shape, d in SEEN)
    assert SEEN[0][1].as_torch() is torch.float16
    assert double.last_result.config in ({"blk": 32}, {"blk": 64})
    assert kernel.params[0].dtype is torch.float16          # the kernel's own records: torch dtypes
    assert supply_params(kernel.params)[0].dtype.as_torch() is torch.float16
    torch.testing.assert_close(kernel(torch.ones(256).half()), torch.full((256,), 2.0))

"""The shared-memory bounds check sees the enclosing `if x < U` guards: `if i < R - off: s[i + off]`
is in range although i alone reaches R - 1 (TileLang's top-k selector scans its histogram this way),
while an unguarded or wrongly guarded access is still an error at the user's line."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError


def shifted(R=256, guard_slack=0):
    @T.prim_func
    def main(X: T.Tensor((R,), "float32"), Y: T.Tensor((8, R), "float32")):
        with T.Kernel(1, threads=R) as bx:
            s = T.alloc_shared((R,), "float32")
            T.copy(X, s)
            for k, off in [(k, 1 << k) for k in range(8)]:  # unrolled: each offset a constant
                for i in T.Parallel(R):
                    Y[k, i] = 0.0
                    if i < R - off + guard_slack:
                        Y[k, i] = s[i + off]
    return main


def test_guarded_shift_matches_torch():
    x = torch.randn(256)
    y = tilelang.compile(shifted(), out_idx=[1], target="cpu")(x)
    for k in range(8):
        off = 1 << k
        ref = torch.zeros(256)
        ref[:256 - off] = x[off:]
        torch.testing.assert_close(y[k], ref)


@pytest.mark.cuda_compile
def test_the_guarded_shift_compiles_for_cuda():
    tilelang.compile(shifted(), out_idx=[1], target={"kind": "cuda", "arch": "sm_90a"})


@pytest.mark.cuda_compile
def test_a_guard_one_too_wide_is_still_an_error():
    with pytest.raises(TilecraftError, match="index out of range: s") as e:
        tilelang.compile(shifted(guard_slack=1), out_idx=[1], target={"kind": "cuda", "arch": "sm_90a"})
    assert "test_guarded_index.py" in str(e.value)

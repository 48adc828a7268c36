"""Blackwell-only constructs (language/blackwell.py) are refused at the user's line, naming the
architecture they need: block-scaled and hand-driven tcgen05, cluster launch control (sm_100) and the
block-scaled mma.sync (sm_120); tensor memory and the tcgen05 gemm are refused by CUDA targets."""
from __future__ import annotations

import pytest

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.language.blackwell import BLACKWELL


@pytest.mark.parametrize("name", sorted(BLACKWELL))
def test_refused_with_the_architecture(name):
    fn = getattr(T, name)
    arch = BLACKWELL[name][0]
    with pytest.raises(tilelang.TilecraftError, match=f"T.{name} is .* needs an {arch} \\(Blackwell\\) GPU") as e:
        @T.prim_func
        def main(A: T.Tensor((128, 128), "float16")):
            with T.Kernel(1, threads=128) as bx:
                fn(A, A, A)
    assert "test_blackwell_refused.py" in str(e.value) and "fn(A, A, A)" in str(e.value)


def test_tmem_is_refused_by_cuda_targets():
    """Tensor memory runs on the CPU target (tests/cpu/test_tcgen05.py); CUDA targets refuse it."""
    @T.prim_func
    def main(A: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=128) as bx:
            C_tmem = T.alloc_tmem([128, 128], "float32")
    with pytest.raises(tilelang.TilecraftError, match="alloc_tmem is a tensor-memory allocation, which needs an sm_100") as e:
        tilelang.compile(main, target={"kind": "cuda", "arch": "sm_90a"})
    assert "C_tmem = T.alloc_tmem" in str(e.value)

"""Blackwell-only constructs (language/blackwell.py) are refused at the user's line, naming the
architecture they need: tcgen05 / tensor memory / cluster launch control (sm_100) and the block-scaled
mma.sync (sm_120)."""
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


def test_the_corpus_spelling_of_tmem():
    with pytest.raises(tilelang.TilecraftError, match="alloc_tmem is a tensor-memory allocation, which needs an sm_100"):
        @T.prim_func
        def main(A: T.Tensor((128, 128), "float16")):
            with T.Kernel(1, threads=128) as bx:
                C_tmem = T.alloc_tmem([128, 128], "float32")

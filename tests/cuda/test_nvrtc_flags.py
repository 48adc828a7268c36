"""nvcc compile flags from TileLang programs (`jit(compile_flags=...)`) under NVRTC: translated where
NVRTC has the option, dropped with a warning where it has not (compiler/nvrtc_flags.py)."""
from __future__ import annotations

import pytest

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.compiler import nvrtc_flags as nf

# the flag list of TileLang's MLA examples (deepseek_mla/example_mla_decode_ws.py)
MLA_FLAGS = ["-O3", "-Wno-deprecated-declarations", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
             "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--expt-relaxed-constexpr",
             "--expt-extended-lambda", "--ptxas-options=-v,--register-usage-level=10", "-DNDEBUG"]


def test_translation_and_warnings():
    nf._WARNED.clear()
    with pytest.warns(UserWarning) as rec:
        out = nf.nvrtc_flags(MLA_FLAGS)
    assert out == ["-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
                   "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--ptxas-options=-v",
                   "--ptxas-options=--register-usage-level=10", "-DNDEBUG"]
    dropped = sorted(str(w.message).split("'")[1] for w in rec)
    assert dropped == sorted(["-O3", "-Wno-deprecated-declarations", "--expt-relaxed-constexpr",
                              "--expt-extended-lambda"])


@pytest.mark.cuda_compile
def test_kernel_with_tilelang_compile_flags_compiles_with_nvrtc(monkeypatch):
    monkeypatch.setenv("TILECRAFT_CUDA_COMPILER", "nvrtc")

    @T.prim_func
    def main(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] * 3.0
    with pytest.warns(UserWarning, match="is not applied with NVRTC"):
        nf._WARNED.clear()
        k = tilelang.compile(main, out_idx=[1], target={"kind": "cuda", "arch": "sm_90a"},
                             pass_configs={"tl.device_compile_flags": MLA_FLAGS})
    assert "Y[" in k.get_kernel_source()

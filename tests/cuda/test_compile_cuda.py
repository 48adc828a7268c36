"""`tilecraft.compiler.cuda.compile_cuda`: the build driver's door to NVRTC / nvcc (no GPU needed).

Checks that both compilers produce a cubin for sm_80 and sm_90a from the same call, that the
choice follows TILECRAFT_CUDA_COMPILER, that the device headers are on the include path, that
fast math is off unless asked for, and that errors come back as CudaCompileError.
"""
from __future__ import annotations

import pytest

from tilecraft.compiler import CudaCompileError, disassemble, find_cuda_tool
from tilecraft.compiler.cuda import compile_cuda, cuda_options
from tilecraft.target import Target

SRC = r"""
#include <tilecraft/tilecraft.h>
extern "C" __global__ void scale_add(const float* __restrict__ a, float* __restrict__ b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i] / 3.0f + __expf(a[i]);
}
"""


# each compiler's availability is its marker (tests/conftest.py): nvrtc -> cuda_compile, nvcc -> nvcc
COMPILERS = [pytest.param("nvrtc", marks=pytest.mark.cuda_compile), pytest.param("nvcc", marks=pytest.mark.nvcc)]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("compiler", COMPILERS)
def test_produces_cubin(monkeypatch, compiler, arch):
    monkeypatch.setenv("TILECRAFT_CUDA_COMPILER", compiler)
    cubin = compile_cuda(SRC, Target("cuda", arch), {})
    assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF"
    if find_cuda_tool("cuobjdump"):
        sass = disassemble(cubin)
        assert f"code for {arch}" in sass
        assert "scale_add" in sass


@pytest.mark.parametrize("compiler", COMPILERS)
def test_compiler_choice_and_flags(monkeypatch, compiler):
    """The env knob picks the compiler; fast math and ptxas options reach it."""
    monkeypatch.setenv("TILECRAFT_CUDA_COMPILER", compiler)
    import tilecraft.compiler.nvcc as nvcc_mod
    import tilecraft.compiler.nvrtc as nvrtc_mod
    seen = {}
    target_mod = nvcc_mod if compiler == "nvcc" else nvrtc_mod
    fn_name = "compile_cuda_nvcc" if compiler == "nvcc" else "compile_cuda_nvrtc"
    real = getattr(target_mod, fn_name)

    def spy(source, arch, **kw):
        seen.update(kw, arch=arch)
        return real(source, arch, **kw)

    monkeypatch.setattr(target_mod, fn_name, spy)
    compile_cuda(SRC, Target("cuda", "sm_80"), {})
    assert seen["arch"] == "sm_80" and seen["fast_math"] is False and seen["lineinfo"] is True
    compile_cuda(SRC, "sm_90a", {"tl.enable_fast_math": True, "tl.ptxas_register_usage_level": 4})
    assert seen["arch"] == "sm_90a" and seen["fast_math"] is True
    assert "--register-usage-level=4" in seen["options"]


@pytest.mark.cuda_compile
@pytest.mark.sass
def test_fast_math_changes_code():
    """--use_fast_math turns the IEEE division into an approximate one: the SASS must differ."""
    plain = disassemble(compile_cuda(SRC, "sm_80", {}))
    fast = disassemble(compile_cuda(SRC, "sm_80", {"tl.enable_fast_math": True}))
    strip = lambda s: [ln.split("/*")[1] for ln in s.splitlines() if "/*0" in ln]  # noqa: E731
    assert strip(plain) != strip(fast)
    # tl.disable_fast_math wins over enable
    assert cuda_options({"tl.enable_fast_math": True, "tl.disable_fast_math": True}, "nvrtc")[0] is False


def test_options_per_compiler():
    fast, opts = cuda_options({}, "nvrtc")
    assert not fast and "--dopt=on" in opts and opts[-2:] == ["-Xptxas", "-O3"]
    fast, opts = cuda_options({"tl.enable_ptxas_verbose_output": True}, "nvcc")
    assert "--dopt=on" not in opts and "-v" in opts
    with pytest.raises(ValueError, match="register_usage_level"):
        cuda_options({"tl.ptxas_register_usage_level": 42}, "nvcc")


@pytest.mark.parametrize("compiler", COMPILERS)
def test_error_is_cuda_compile_error(monkeypatch, compiler):
    monkeypatch.setenv("TILECRAFT_CUDA_COMPILER", compiler)
    with pytest.raises(CudaCompileError, match="undefined_name"):
        compile_cuda('extern "C" __global__ void k(int* x) { x[0] = undefined_name; }\n', "sm_80", {})


def test_target_without_arch_is_an_error():
    with pytest.raises(CudaCompileError, match="architecture"):
        compile_cuda(SRC, Target("cpu"), {})

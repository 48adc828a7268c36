"""NVRTC / nvcc front doors: options, architectures, error reporting, header discovery (no GPU)."""
from __future__ import annotations

import os

import pytest

from tilecraft.compiler import (CompileError, CudaBinary, CudaCompileError, compile_cuda_nvcc,
                                compile_cuda_nvrtc, cuda_include_dirs, disassemble, find_cuda_tool,
                                parse_arch, resource_usage)

OK_SRC = 'extern "C" __global__ void add1(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1.0f; }\n'

BAD_SRC = """#include <tilecraft/tilecraft.h>
extern "C" __global__ void broken(float* x) {
  int i = threadIdx.x;
  x[i] = tc::exp(x[i]);
  x[i] = undefined_name + 1;   // line 5
  x[i] += 2.0f;
}
"""


# NVRTC / nvcc availability: the cuda_compile / nvcc markers (tests/conftest.py)


@pytest.mark.parametrize("text,expected", [
    ("sm_80", ("80", "")), ("sm_90a", ("90", "a")), ("90a", ("90", "a")), ("SM_86", ("86", "")),
    ("compute_89", ("89", "")), ("sm_100f", ("100", "f")),
])
def test_parse_arch(text, expected):
    assert parse_arch(text) == expected


@pytest.mark.parametrize("text", ["sm80x", "hopper", "sm_9", ""])
def test_parse_arch_rejects_garbage(text):
    with pytest.raises(ValueError, match="architecture"):
        parse_arch(text)


@pytest.mark.cuda_compile
def test_cuda_include_dirs_hold_fp16_headers():
    for d in cuda_include_dirs():
        assert os.path.isfile(os.path.join(d, "cuda_fp16.h")), d
    print("\nNVRTC CUDA headers:", cuda_include_dirs() or "(built into NVRTC)")


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"])
def test_nvrtc_real_archs_give_cubins(arch):
    b = compile_cuda_nvrtc(OK_SRC, arch)
    assert isinstance(b, CudaBinary)
    assert b.cubin[:4] == b"\x7fELF" and b.arch == arch and b.compiler == "nvrtc"
    assert b.ptx and ".entry add1" in b.ptx  # extern "C": unmangled name
    assert b.seconds > 0
    assert "bytes" in repr(b) and "\\x" not in repr(b)


@pytest.mark.cuda_compile
def test_nvrtc_options_are_passed(tmp_path):
    (tmp_path / "extra.h").write_text("#define EXTRA_SCALE 3.0f\n")
    src = '#include "extra.h"\nextern "C" __global__ void k(float* x) { x[0] = SCALE * EXTRA_SCALE * __expf(x[1]); }\n'
    b = compile_cuda_nvrtc(src, "sm_90a", include_dirs=[str(tmp_path)], options=["-DSCALE=2.0f"],
                           fast_math=True, lineinfo=True)
    assert ".loc" in b.ptx  # -lineinfo
    with pytest.raises(CudaCompileError, match="SCALE"):
        compile_cuda_nvrtc(src, "sm_90a", include_dirs=[str(tmp_path)])


@pytest.mark.cuda_compile
def test_nvrtc_error_reports_line_and_source():
    with pytest.raises(CudaCompileError) as info:
        compile_cuda_nvrtc(BAD_SRC, "sm_90a", name="broken.cu")
    err = info.value
    assert isinstance(err, CompileError)
    assert err.line == 5
    assert err.arch == "sm_90a" and err.compiler == "nvrtc"
    msg = str(err)
    assert "undefined_name" in msg and "first error at line 5" in msg
    assert ">" in msg and "5 |   x[i] = undefined_name + 1;" in msg  # the marked source line
    assert err.source == BAD_SRC


@pytest.mark.nvcc
def test_nvcc_compiles_and_matches_nvrtc_kernel_names():
    b = compile_cuda_nvcc(OK_SRC, "sm_90a", options=["-DUNUSED=1"], lineinfo=True, fast_math=True)
    assert b.cubin[:4] == b"\x7fELF" and b.compiler == "nvcc" and b.arch == "sm_90a"
    if find_cuda_tool("cuobjdump"):
        assert "add1" in resource_usage(b.cubin)


@pytest.mark.nvcc
def test_nvcc_error_reports_line_and_source():
    with pytest.raises(CudaCompileError) as info:
        compile_cuda_nvcc(BAD_SRC, "sm_80", name="broken.cu")
    err = info.value
    assert err.line == 5 and err.compiler == "nvcc"
    assert "undefined_name" in str(err) and "tilecraft_nvcc_" not in str(err)  # temp path hidden


@pytest.mark.cuda_compile
@pytest.mark.sass
def test_disassemble_and_resource_usage():
    b = compile_cuda_nvrtc(OK_SRC, "sm_80")
    sass = disassemble(b.cubin)
    assert "add1" in sass and "EXIT" in sass
    usage = resource_usage(b.cubin)["add1"]
    assert usage["registers"] > 0 and usage["local_bytes"] == 0


def test_disassemble_without_tools_says_what_to_install(monkeypatch):
    from tilecraft.compiler import sass
    monkeypatch.setattr(sass, "find_cuda_tool", lambda name: None)
    with pytest.raises(RuntimeError, match="nvidia-cuda-cuobjdump"):
        sass.disassemble(b"\x7fELF")
    with pytest.raises(RuntimeError, match="cuobjdump"):
        sass.resource_usage(b"\x7fELF")


def test_header_fingerprint_is_stable_hex():
    from tilecraft.device import fingerprint, include_dir
    fp = fingerprint()
    assert len(fp) == 64 and int(fp, 16) >= 0 and fingerprint() == fp
    assert os.path.isfile(os.path.join(include_dir(), "tilecraft", "tilecraft.h"))


def test_ptxas_performance_notes_become_warnings():
    from tilecraft.compiler.cuda import warn_performance_notes
    from tilecraft.errors import PerformanceWarning
    log = ("ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized "
           "due to non wgmma instructions reading accumulator registers of  a wgmma between start and end "
           "of the pipeline stage in the function 'main_kernel' in line 0")
    with pytest.warns(PerformanceWarning, match=r"gemm\.cu \(sm_90a\): ptxas: \(C7514\) Potential Performance Loss"):
        warn_performance_notes(log, "gemm.cu", "sm_90a")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_performance_notes("ptxas info    : Used 128 registers", "gemm.cu", "sm_90a")


def test_serialised_wgmma_is_reported():
    """A real case: an asynchronous wgmma loop that reads an accumulator while its wgmmas are in
    flight makes ptxas serialise them; compile_cuda says so, naming the file and the arch."""
    import re
    import tilecraft as tilelang
    from tilecraft.compiler.cuda import compile_cuda
    from tilecraft.errors import PerformanceWarning
    from tilecraft.kernels import gemm
    k = tilelang.compile(gemm.matmul.fn(512, 512, 512, 128, 128, 64, num_stages=3, threads=256), out_idx=[-1],
                         target={"kind": "cuda", "arch": "sm_90a"},
                         pass_configs={"tc.use_wgmma": True, "tc.wgmma_async": True})
    src = k.get_kernel_source()
    gemm_call = re.search(r"tc::gemm_ss_sm90<[^;]*;\n", src)
    peek = "    if (C_local[0] == 12345.0f) C[tc_tid] = tc::half_t(0.0f);\n"
    bad = src[:gemm_call.end()] + peek + src[gemm_call.end():]
    with pytest.warns(PerformanceWarning, match=r"peek\.cu \(sm_90a\): ptxas: \(C751\d\).*serialized"):
        compile_cuda(bad, "sm_90a", name="peek.cu")

"""Compile-only tests of the device header library (no GPU): every header function is called by
the kernels in header_kernels.cu, which must compile with NVRTC and nvcc for sm_80 and sm_90a,
and each kernel's SASS must contain the instruction its header exists for."""
from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile

import pytest

from tilecraft.compiler import (CudaCompileError, compile_cuda_nvcc, compile_cuda_nvrtc,
                                disassemble, find_cuda_tool, find_nvcc, resource_usage,
                                sass_opcodes)
from tilecraft.device import include_dir

HERE = os.path.dirname(os.path.abspath(__file__))
ARCHS = ["sm_80", "sm_90a"]


def _nvrtc_available() -> str | None:
    try:
        compile_cuda_nvrtc('extern "C" __global__ void k() {}', "sm_80")
        return None
    except CudaCompileError as e:
        return str(e)


@functools.lru_cache(maxsize=None)
def _skip_reason(compiler: str) -> str | None:
    if compiler == "nvcc":
        return None if find_nvcc() else "nvcc not found"
    return _nvrtc_available()


def _source(name: str) -> str:
    with open(os.path.join(HERE, name)) as f:
        return f.read()


@functools.lru_cache(maxsize=None)
def _compile(name: str, compiler: str, arch: str):
    reason = _skip_reason(compiler)
    if reason:
        pytest.skip(f"{compiler} unavailable: {reason}")
    fn = compile_cuda_nvrtc if compiler == "nvrtc" else compile_cuda_nvcc
    return fn(_source(name), arch)


@functools.lru_cache(maxsize=None)
def _disassembler_problem() -> str | None:
    """Why SASS cannot be printed here (e.g. CUDA 13's cuobjdump without nvdisasm), or None."""
    try:
        disassemble(_compile("header_kernels.cu", "nvrtc", "sm_80").cubin)
        return None
    except RuntimeError as e:
        return str(e)


def _need_disassembler():
    problem = _disassembler_problem()
    if problem:
        pytest.skip(f"cannot disassemble: {problem}")


@functools.lru_cache(maxsize=None)
def _sass_by_kernel(name: str, compiler: str, arch: str) -> dict[str, list[str]]:
    sass = disassemble(_compile(name, compiler, arch).cubin)
    parts = re.split(r"Function\s*:\s*(\w+)", sass)
    return {fn: sass_opcodes(body) for fn, body in zip(parts[1::2], parts[2::2])}


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
@pytest.mark.parametrize("arch", ARCHS)
def test_headers_compile_cleanly(compiler, arch):
    binary = _compile("header_kernels.cu", compiler, arch)
    assert binary.cubin[:4] == b"\x7fELF"
    assert binary.arch == arch and binary.compiler == compiler
    assert "warning" not in binary.log.lower(), binary.log


# kernel -> opcode prefixes that must appear in its SASS
EXPECTED = {
    "tc_test_mma": ["HMMA.16816.F32", "HMMA.16816.F32.BF16", "HMMA.16816.F16", "LDSM.16.M88.4",
                    "LDSM.16.MT88.2", "LDSM.16.M88", "LDGSTS.E.BYPASS.128", "LDGSTS.E.64",
                    "LDGSTS.E", "LDGDEPBAR", "DEPBAR", "SHFL.BFLY"],
    "tc_test_reduce": ["SHFL.BFLY"],
    "tc_test_atomic": ["RED", "ATOM"],
    "tc_test_memory": ["LDG.E.128", "STG.E.128", "LDS.128", "STS.128", "LDG.E.64", "BAR.SYNC"],
    "tc_test_math": ["MUFU.EX2", "MUFU.LG2", "MUFU.RSQ", "MUFU.TANH"],
}


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
@pytest.mark.parametrize("arch", ARCHS)
def test_sass_contains_the_hardware_instructions(compiler, arch):
    _need_disassembler()
    by_kernel = _sass_by_kernel("header_kernels.cu", compiler, arch)
    assert set(EXPECTED) | {"tc_test_print"} <= set(by_kernel)
    for kernel, prefixes in EXPECTED.items():
        ops = by_kernel[kernel]
        for prefix in prefixes:
            assert any(op.startswith(prefix) for op in ops), (kernel, arch, prefix, sorted(set(ops)))


@pytest.mark.parametrize("arch", ARCHS)
def test_atomics_without_result_become_red(arch):
    """Ignored return values must compile to fire-and-forget RED, not ATOM round trips."""
    _need_disassembler()
    ops = _sass_by_kernel("header_kernels.cu", "nvrtc", arch)["tc_test_atomic"]
    assert any(re.match(r"REDG?\.E\.ADD\.F32", op) for op in ops), sorted(set(ops))
    assert any(re.match(r"REDG?\.E\.ADD\.F64", op) for op in ops), sorted(set(ops))


def test_bf16_atomic_add_is_native_on_sm90():
    _need_disassembler()
    ops = _sass_by_kernel("header_kernels.cu", "nvrtc", "sm_90a")["tc_test_atomic"]
    assert any(op.startswith("ATOM.E.ADD.BF16") for op in ops), sorted(set(ops))


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
@pytest.mark.parametrize("arch", ARCHS)
def test_pipelined_gemm_compiles_without_spills(compiler, arch):
    binary = _compile("gemm_kernel.cu", compiler, arch)
    if find_cuda_tool("cuobjdump") is None:
        pytest.skip("cuobjdump not installed")
    usage = resource_usage(binary.cubin)["tc_gemm_f16"]
    assert usage["local_bytes"] == 0, usage  # no register spills
    assert usage["registers"] <= 255, usage
    _need_disassembler()
    ops = _sass_by_kernel("gemm_kernel.cu", compiler, arch)["tc_gemm_f16"]
    # 2 k16 steps x (4 x 8) mma tiles, fully unrolled
    assert sum(op.startswith("HMMA.16816.F32") for op in ops) == 64
    assert sum(op.startswith("LDSM") for op in ops) == 16
    assert sum(op.startswith("LDGSTS.E.BYPASS.128") for op in ops) >= 8


def test_each_header_is_self_contained():
    """Every header compiles on its own (its includes are complete)."""
    if _skip_reason("nvrtc"):
        pytest.skip(f"nvrtc unavailable: {_skip_reason('nvrtc')}")
    headers = sorted(os.listdir(os.path.join(include_dir(), "tilecraft")))
    assert {"common.h", "mma.h", "ldmatrix.h", "cp_async.h", "memory.h", "reduce.h", "atomic.h",
            "math.h", "print.h", "tilecraft.h"} <= set(headers)
    for h in headers:
        compile_cuda_nvrtc(f'#include <tilecraft/{h}>\n#include <tilecraft/{h}>\n'
                           'extern "C" __global__ void k() {}\n', "sm_80")


def test_headers_use_no_host_includes():
    """NVRTC has no host headers: only the toolkit's float headers (cuda_fp16.h / cuda_bf16.h, and
    cuda_fp8.h for kernels that define TC_FP8) and our own may be included."""
    root = os.path.join(include_dir(), "tilecraft")
    for h in os.listdir(root):
        with open(os.path.join(root, h)) as f:
            for line in f:
                m = re.match(r'\s*#\s*include\s*[<"]([^>"]+)[>"]', line)
                if m:
                    assert m.group(1) in {"cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h"} or \
                        os.path.exists(os.path.join(root, m.group(1))), (h, line)


HOST_CHECK = r"""
#include <tilecraft/common.h>
#include <cstdio>
int main() {
  for (int a = -9; a <= 9; ++a)
    for (int b = -4; b <= 4; ++b) {
      if (b == 0) continue;
      std::printf("%d %d %d %d %d %lld\n", a, b, tc::floordiv(a, b), tc::floormod(a, b),
                  tc::ceildiv(a, b), (long long)tc::floordiv((long long)a * 1000000000LL, b));
    }
  std::printf("u %u %u %u\n", tc::floordiv(7u, 2u), tc::floormod(7u, 2u), tc::ceildiv(7u, 2u));
  return 0;
}
"""


def test_integer_helpers_have_python_semantics():
    """floordiv/floormod/ceildiv are __host__ __device__: build them for the host with nvcc and
    compare with Python's // and % on every sign combination."""
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "check.cu"), os.path.join(tmp, "check")
        with open(src, "w") as f:
            f.write(HOST_CHECK)
        subprocess.run([nvcc, "-std=c++17", f"-I{include_dir()}", "-o", exe, src], check=True,
                       capture_output=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    lines = out.strip().splitlines()
    assert lines[-1] == "u 3 1 4"
    for line in lines[:-1]:
        a, b, fd, fm, cd, big = map(int, line.split())
        assert (fd, fm, cd, big) == (a // b, a % b, -(-a // b), (a * 1000000000) // b), line


def test_float_atomic_max_min_ordering_trick():
    """atomic_max/min(float) rely on: for same-sign floats, signed-int order (non-negative) and
    reversed unsigned order (negative) equal float order.  Check the exact decision procedure."""
    import random
    import struct

    def bits(x, fmt):
        return struct.unpack(fmt, struct.pack("<f", x))[0]

    def atomic_max(cur, v):
        if bits(v, "<i") >= 0:
            return struct.unpack("<f", struct.pack("<i", max(bits(cur, "<i"), bits(v, "<i"))))[0]
        return struct.unpack("<f", struct.pack("<I", min(bits(cur, "<I"), bits(v, "<I"))))[0]

    def atomic_min(cur, v):
        if bits(v, "<i") >= 0:
            return struct.unpack("<f", struct.pack("<i", min(bits(cur, "<i"), bits(v, "<i"))))[0]
        return struct.unpack("<f", struct.pack("<I", max(bits(cur, "<I"), bits(v, "<I"))))[0]

    rng = random.Random(0)
    special = [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), 3.4e38, -3.4e38, 1e-45, -1e-45]
    f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]  # noqa: E731
    values = [f32(x) for x in special + [rng.uniform(-1e6, 1e6) for _ in range(300)]]
    for cur in values:
        for v in values[:40]:
            assert atomic_max(cur, v) == max(cur, v), (cur, v)
            assert atomic_min(cur, v) == min(cur, v), (cur, v)

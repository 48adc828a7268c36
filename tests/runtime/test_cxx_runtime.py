"""The CPU target's per-toolchain build products (compiler/cxx.py): the precompiled header and the
linker choice (gold where it links and loads a library), and that kernel libraries built with them,
and with the fallback linker, compute what torch does."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft import env
from tilecraft.compiler import cxx

pytestmark = pytest.mark.cxx

# C = 0.5 + A @ B through tc::gemm_f32acc (OpenMP-free) in a library of our own, M x N x K row-major
_SOURCE = """#include "tilecraft_cpu.h"
extern "C" void run(const {t}* a, const {t}* b, float* c, int64_t m, int64_t n, int64_t k) {{
  tc::gemm_f32acc(m, n, k, a, k, 1, b, n, 1, c, n, 1);
}}
"""
_TYPES = {"tc::half_t": torch.float16, "tc::bfloat16_t": torch.bfloat16, "float": torch.float32}


@pytest.fixture
def fresh_runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILECRAFT_DISABLE_CACHE", raising=False)
    monkeypatch.setattr(cxx, "_RT", {})
    return tmp_path


def _gemm_via_library(tmp_path, ctype, m=37, n=45, k=29):
    lib_path = tmp_path / f"gemm_{ctype.replace(':', '_')}.so"
    lib_path.write_bytes(cxx.compile_cxx(_SOURCE.format(t=ctype), "gemm_probe"))
    lib = ctypes.CDLL(str(lib_path))
    tt = _TYPES[ctype]
    a, b = torch.randn(m, k).to(tt), torch.randn(k, n).to(tt)
    c = torch.full((m, n), 0.5)
    lib.run(ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr()), ctypes.c_void_p(c.data_ptr()),
            ctypes.c_int64(m), ctypes.c_int64(n), ctypes.c_int64(k))
    torch.testing.assert_close(c, (0.5 + a.double() @ b.double()).float(), rtol=1e-5, atol=1e-4)


def _gold_links_openmp() -> bool:
    """g++ links a shared OpenMP library with gold here (checked apart from the runtime's own probe)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "p.cpp")
        with open(src, "w") as f:
            f.write('extern "C" int p(int n) {\n  int s = 0;\n#pragma omp parallel for reduction(+ : s)\n'
                    '  for (int i = 0; i < n; ++i) s += i;\n  return s;\n}\n')
        r = subprocess.run([env.cxx(), "-O1", "-fPIC", "-fopenmp", "-shared", cxx.GOLD, src, "-o",
                            os.path.join(tmp, "p.so")], capture_output=True)
        if r.returncode != 0:
            return False
        try:
            return ctypes.CDLL(os.path.join(tmp, "p.so")).p(5) == 10
        except OSError:
            return False


def test_pch_and_linker_are_made_once_and_used(fresh_runtime):
    rt = cxx.cpu_runtime(env.cxx())
    assert rt.folder is not None and rt.pch and cxx.pch_dir(env.cxx()) == rt.folder
    if shutil.which("ld.gold") and _gold_links_openmp():
        assert rt.ldflags == [cxx.GOLD]
    else:  # no gold, or one that cannot link an OpenMP library here (an H200 machine's g++): the default linker
        assert rt.ldflags == []
    assert cxx.cpu_runtime(env.cxx()) is rt  # once per process
    for ctype in _TYPES:
        _gemm_via_library(fresh_runtime, ctype)


def test_a_linker_that_fails_the_probe_is_not_used(fresh_runtime, monkeypatch):
    monkeypatch.setattr(cxx, "GOLD", "-fuse-ld=no-such-linker")
    rt = cxx.cpu_runtime(env.cxx())
    assert rt.ldflags == [] and rt.pch
    _gemm_via_library(fresh_runtime, "tc::half_t")


@tilelang.jit(out_idx=[-1])
def _two_gemms(M, N, K, dtype):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, K), dtype)
            B_s = T.alloc_shared((K, N), dtype)
            S = T.alloc_fragment((M, N), "float32")
            W = T.alloc_fragment((N, N), "float32")
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(S)
            T.gemm(A_s, B_s, S)
            for i, j in T.Parallel(N, N):
                W[i, j] = T.if_then_else(i == j, 2.0, 0.0)
            T.clear(C_f)
            T.gemm(S, W, C_f)
            T.copy(C_f, C)
    return main


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_kernel_linked_here_matches_torch(fresh_runtime, dtype):
    tt = getattr(torch, dtype)
    a, b = torch.randn(24, 16).to(tt), torch.randn(16, 32).to(tt)
    with tilelang.target.default_target("cpu"):
        c = _two_gemms(24, 32, 16, dtype)(a, b)
    torch.testing.assert_close(c, 2 * (a.float() @ b.float()), rtol=1e-5, atol=1e-4)

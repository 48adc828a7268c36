"""The kernel cache key names the compiler: NVRTC then nvcc for the same kernel are two entries
(compile-only, no GPU needed), and each compiler hits its own entry afterwards."""
from __future__ import annotations

import pytest

import tilecraft as tilelang
from tilecraft import env
from tilecraft.compiler.cache import DiskCache, toolchain_key
from tilecraft.compiler.nvcc import find_nvcc
from tilecraft.kernels import elementwise

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
TARGET = {"kind": "cuda", "arch": "sm_80"}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    for name in ("TILECRAFT_DISABLE_CACHE", "TILELANG_DISABLE_CACHE", "TILELANG_CACHE_DIR",
                 "TILECRAFT_CUDA_COMPILER", "TILELANG_CUDA_COMPILER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@needs_nvcc
def test_nvrtc_then_nvcc_gives_two_entries(cache_dir, monkeypatch):
    func = elementwise.vector_add.get_tir(1000)
    kernels = DiskCache("kernels")
    first = tilelang.compile(func, out_idx=[-1], target=TARGET)
    assert not first.artifact.from_cache and len(kernels.keys()) == 1

    monkeypatch.setenv("TILECRAFT_CUDA_COMPILER", "nvcc")
    second = tilelang.compile(func, out_idx=[-1], target=TARGET)
    assert not second.artifact.from_cache, "nvcc was served NVRTC's cubin from the cache"
    assert len(kernels.keys()) == 2
    assert second.artifact.binary and second.artifact.binary != first.artifact.binary

    # each compiler now hits its own entry
    again = tilelang.compile(func, out_idx=[-1], target=TARGET)
    assert again.artifact.from_cache and again.artifact.binary == second.artifact.binary
    monkeypatch.setenv("TILECRAFT_CUDA_COMPILER", "nvrtc")
    back = tilelang.compile(func, out_idx=[-1], target=TARGET)
    assert back.artifact.from_cache and back.artifact.binary == first.artifact.binary
    assert len(kernels.keys()) == 2


def test_toolchain_key_names_compiler_and_version(monkeypatch):
    from tilecraft.target import Target
    cuda = Target("cuda", "sm_80")
    monkeypatch.delenv("TILECRAFT_CUDA_COMPILER", raising=False)
    monkeypatch.delenv("TILELANG_CUDA_COMPILER", raising=False)
    with env.override(cuda_compiler="nvrtc"):
        nvrtc = toolchain_key(cuda)
    assert nvrtc[0] == "nvrtc" and isinstance(nvrtc[1], tuple) and len(nvrtc[1]) == 2
    if find_nvcc() is not None:
        with env.override(cuda_compiler="nvcc"):
            nvcc = toolchain_key(cuda)
        assert nvcc[0] == "nvcc" and "release" in nvcc[2]
    cpu = toolchain_key(Target.resolve("cpu"))
    assert cpu[0] == "cxx" and cpu[2]  # the C++ compiler's --version text


def test_pass_configs_and_headers_change_the_key(monkeypatch):
    from tilecraft import device
    from tilecraft.compiler.cache import kernel_cache_key
    from tilecraft.target import Target
    t = Target("cuda", "sm_80")
    base = kernel_cache_key("prog", t, {})
    assert kernel_cache_key("prog", t, {"tl.enable_fast_math": True}) != base
    assert kernel_cache_key("prog", Target("cuda", "sm_90a"), {}) != base
    monkeypatch.setattr(device, "fingerprint", lambda: "0" * 64)
    assert kernel_cache_key("prog", t, {}) != base

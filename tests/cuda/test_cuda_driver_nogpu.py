"""The driver glue imports and fails cleanly without a GPU; argument packing is checked on CPU."""
from __future__ import annotations

import ctypes
import struct

import pytest

from tilecraft.runtime import cuda_driver
from tilecraft.runtime.cuda_driver import ArgPacker, CudaError


def _gpu_present() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


@pytest.mark.skipif(_gpu_present(), reason="a GPU is present: the no-GPU error path cannot be seen")
def test_no_gpu_gives_a_clear_cuda_error():
    assert issubclass(CudaError, RuntimeError)
    with pytest.raises(CudaError, match="driver|CUDA"):
        cuda_driver.device_properties(0)
    with pytest.raises(CudaError, match="driver|CUDA"):
        cuda_driver.CudaModule(b"\x7fELF not a real cubin")
    with pytest.raises(CudaError):
        cuda_driver.ensure_context(0)


def test_check_raises_with_kernel_name():
    pytest.importorskip("cuda.bindings")
    from cuda.bindings import driver
    assert cuda_driver.check((driver.CUresult.CUDA_SUCCESS, 7), "x") == 7
    assert cuda_driver.check((driver.CUresult.CUDA_SUCCESS,), "x") is None
    assert cuda_driver.check((driver.CUresult.CUDA_SUCCESS, 1, 2), "x") == (1, 2)
    with pytest.raises(CudaError, match=r"cuLaunchKernel failed for kernel 'my_kernel'"):
        cuda_driver.check((driver.CUresult.CUDA_ERROR_INVALID_VALUE,), "cuLaunchKernel", "my_kernel")


def test_arg_packer_layout_and_pointer_array():
    kinds = ["ptr", "int32", "ptr", "float32", "int64", "int8", "float64", "uint32", "float16"]
    values = [0x7F0000001000, -5, 0x7F0000002000, 1.5, -(2**40), -3, 2.25, 2**32 - 1, 0.5]
    p = ArgPacker(kinds)
    p.pack(values)
    raw = p.raw()
    # natural alignment: ptr@0 i32@8 ptr@16 f32@24 i64@32 i8@40 f64@48 u32@56 f16@60
    offsets = [0, 8, 16, 24, 32, 40, 48, 56, 60]
    fmts = ["<Q", "<i", "<Q", "<f", "<q", "<b", "<d", "<I", "<e"]
    for off, fmt, v in zip(offsets, fmts, values):
        assert struct.unpack_from(fmt, raw, off)[0] == v
    # the void*[] handed to cuLaunchKernel points at each argument
    ptrs = (ctypes.c_void_p * len(kinds)).from_address(p.address)
    base = ctypes.addressof(p._buffer)
    assert [ptrs[i] - base for i in range(len(kinds))] == offsets
    assert base % 8 == 0


def test_arg_packer_rejects_bad_kinds_and_values():
    with pytest.raises(ValueError, match="unknown kernel argument kind"):
        ArgPacker(["ptr", "complex64"])
    p = ArgPacker(["int32"])
    with pytest.raises(struct.error):
        p.pack([2**40])
    assert ArgPacker([]).address == 0  # no-argument kernels pass NULL

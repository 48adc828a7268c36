"""The generated CUDA call (runtime/fastpath.py) without a GPU: the kernel is compiled for sm_80,
and its generated `__call__` runs against stand-ins for CUDA tensors, the driver entry and the
stream lookup, so every line of the CUDA branch executes here; what reaches `cuLaunchKernel`
(handle, grid, block, shared memory, stream, the packed pointers) is checked.  The real launches
are in tests/gpu/test_torch_gpu.py."""
from __future__ import annotations

import ctypes
import struct
import threading
from types import SimpleNamespace

import pytest
import torch

import tilecraft as tilelang
from tilecraft.kernels import elementwise


def stand_in_entry(slots, launch, hv=1, **extra):
    """What `_DeviceEntry` offers the generated call."""
    lock = threading.Lock()
    hv, av = ctypes.c_void_p(hv), ctypes.c_void_p(ctypes.addressof(slots))
    return SimpleNamespace(lock=lock, slots=slots, hv=hv, av=av, launch=launch,
                           fast=(lock.acquire, lock.release, slots, launch, hv, av), **extra)


class CudaLike:
    """Just what the generated checks and launch touch on a CUDA tensor."""

    is_cuda = True

    def __init__(self, shape, dtype, ptr, device=0, contiguous=True):
        self.shape, self.dtype, self._ptr, self._dev, self._contig = torch.Size(shape), dtype, ptr, device, contiguous

    def get_device(self):
        return self._dev

    def data_ptr(self):
        return self._ptr

    def is_contiguous(self):
        return self._contig


def python_call(kernel, **stand_ins):
    """The kernel with the Python call, built with `stand_ins` for what it reads from torch and the
    launcher (the compiled launcher's twin is tested in tests/runtime/test_claunch.py; on a GPU
    machine it would be the default)."""
    from tilecraft.runtime.fastpath import specialize
    kernel.__class__ = specialize(kernel, "python", stand_ins)
    assert type(kernel).launcher == "python"
    return kernel


@pytest.fixture
def staged():
    kernel = tilelang.compile(elementwise.vector_add.get_tir(1000), out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    launches, allocs = [], []
    slots = (ctypes.c_int64 * 3)()

    def launch(*args):
        launches.append(args[:10] + (bytes(slots),))
        return 0

    entry = stand_in_entry(slots, launch, hv=0xF00D)

    def empty(*size, dtype, device):
        allocs.append((size, dtype, device))
        return CudaLike(size, dtype, 0x9000 + 0x1000 * len(allocs))
    def empty_like(t):
        allocs.append(("like", t))
        return CudaLike(t.shape, t.dtype, 0x9000 + 0x1000 * len(allocs), t.get_device())
    python_call(kernel, Tensor=CudaLike, empty=empty, empty_like=empty_like, raw_stream=lambda dev: 0x5EA)
    type(kernel).call_namespace["entries"][0] = entry
    fallbacks = []
    kernel._call_checked = lambda args, stream: fallbacks.append(args) or "general path"
    return kernel, launches, allocs, fallbacks


def test_generated_cuda_call_launches_what_it_should(staged):
    kernel, launches, allocs, fallbacks = staged
    a, b = CudaLike((1000,), torch.float32, 0x1000), CudaLike((1000,), torch.float32, 0x2000)
    out = kernel(a, b)
    assert not fallbacks and len(launches) == 1
    assert allocs == [("like", a)]  # C has A's shape and dtype
    hv, gx, gy, gz, bx, by, bz, smem, sv, av, packed = launches[0]
    la = kernel._launch
    assert hv.value == 0xF00D and (gx, gy, gz) == la._grid and (bx, by, bz) == la.block and smem == la.smem
    assert sv.value == 0x5EA
    assert struct.unpack("<3q", packed) == (0x1000, 0x2000, out.data_ptr())

    c = CudaLike((1000,), torch.float32, 0x7000)
    assert kernel(a, b, c) is c
    assert struct.unpack("<3q", launches[-1][-1]) == (0x1000, 0x2000, 0x7000)
    kernel(a, b, c, stream=0xABC)  # an explicit stream handle
    assert launches[-1][8].value == 0xABC


@pytest.mark.parametrize("bad", [
    dict(dtype=torch.float16), dict(shape=(999,)), dict(device=1), dict(contiguous=False)])
def test_any_mismatch_goes_to_the_checked_path(staged, bad):
    kernel, launches, _, fallbacks = staged
    a = CudaLike((1000,), torch.float32, 0x1000)
    kw = dict(shape=(1000,), dtype=torch.float32, ptr=0x2000)
    kw.update(bad)
    b = CudaLike(**kw)
    assert kernel(a, b) == "general path" and not launches and len(fallbacks) == 1


def test_a_failed_launch_goes_to_the_slow_path(staged):
    kernel, launches, _, _ = staged
    failures = []
    entry = stand_in_entry((ctypes.c_int64 * 3)(), lambda *args: 700,  # CUDA_ERROR_ILLEGAL_ADDRESS
                           launch_failed=lambda *args: failures.append(args))
    kernel._launch._per_device[0] = entry
    a, b = CudaLike((1000,), torch.float32, 0x1000), CudaLike((1000,), torch.float32, 0x2000)
    kernel(a, b)
    err, grid, block, smem, stream, values = failures[0]
    assert err == 700 and stream == 0x5EA and values[:2] == [0x1000, 0x2000]


def test_kernels_that_do_not_qualify_keep_the_general_call():
    import tilecraft.language as T

    @tilelang.jit(out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    def dyn(block=128):
        n = T.dynamic("n")

        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
                for i in T.Parallel(block):
                    C[bx * block + i] = A[bx * block + i] * 2.0
        return main

    k = dyn()
    assert not hasattr(type(k), "launcher")  # a symbolic grid: CudaLauncher.__call__ does it
    # the launcher's own call (symbols, grid from them) reaches the same ctypes launch
    la = k._launch
    slots = (ctypes.c_int64 * len(la.param_kinds))()
    seen = []
    la._per_device[0] = SimpleNamespace(lock=threading.Lock(), slots=slots, hv=ctypes.c_void_p(1),
                                        av=ctypes.c_void_p(ctypes.addressof(slots)),
                                        launch=lambda *args: seen.append(args[:9] + (list(slots),)) or 0)
    la._stream_of = lambda dev: 0x77
    a, c = CudaLike((1000,), torch.float32, 0x1000), CudaLike((1000,), torch.float32, 0x3000)
    la([a, c], {"n": 1000}, "dyn")
    _, gx, gy, gz, bx, by, bz, smem, sv, values = seen[0]
    assert (gx, gy, gz) == (8, 1, 1) and bx == 128 and sv.value == 0x77
    assert values[:2] == [0x1000, 0x3000] and values[2] & 0xFFFFFFFF == 1000


def test_outputs_unlike_any_input_are_allocated_on_the_inputs_device():
    import tilecraft.language as T

    @tilelang.jit(out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    def row_sums(M=64, N=96):
        @T.prim_func
        def main(X: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
            with T.Kernel(M, threads=32) as bx:
                acc = T.alloc_fragment((1, N), "float32")
                s = T.alloc_fragment((1,), "float32")
                T.copy(X[bx, 0], acc)
                T.reduce_sum(acc, s, dim=1)
                for i in T.Parallel(1):
                    S[bx + i] = s[i]
        return main

    allocs, launched = [], []
    slots = (ctypes.c_int64 * 2)()
    k = python_call(row_sums(), Tensor=CudaLike, raw_stream=lambda dev: 1,
                    empty=lambda *size, dtype, device: allocs.append((size, dtype, device)) or CudaLike(size, dtype, 0xB000, 1))
    type(k).call_namespace["entries"][1] = stand_in_entry(slots, lambda *a: launched.append(list(slots)) or 0)
    k(CudaLike((64, 96), torch.float32, 0xA000, device=1))
    assert allocs == [((64,), torch.float32, torch.device("cuda", 1))] and launched == [[0xA000, 0xB000]]


def test_an_exception_in_the_launch_releases_the_lock(staged):
    kernel, launches, _, _ = staged
    boom = stand_in_entry((ctypes.c_int64 * 3)(), lambda *args: (_ for _ in ()).throw(KeyboardInterrupt()))
    kernel._launch._per_device[0] = boom
    a, b = CudaLike((1000,), torch.float32, 0x1000), CudaLike((1000,), torch.float32, 0x2000)
    with pytest.raises(KeyboardInterrupt):
        kernel(a, b)
    assert not boom.lock.locked()

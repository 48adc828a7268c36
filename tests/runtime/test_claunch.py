"""The compiled launcher (runtime/claunch.cpp) without a GPU, in both builds: the torch-aware one
(at::Tensor read directly) and the Python.h-only one (tensor attributes through Python).

- CPU target: the launcher is what users get; results equal torch on fresh random inputs, and
  every kind of bad argument falls through to the checked path and its message;
- CUDA launch mode: the same C code launches through a recording stand-in for cuLaunchKernel
  (a ctypes callback), on stand-in CUDA tensors (getter route) and on CPU tensors read as
  at::Tensor (device test `is_cpu`): handle, grid, block, shared memory, stream and the
  argument pointers that reach the driver are checked; a failed launch reaches `on_error`.
The real launches are in tests/gpu/test_torch_gpu.py."""
from __future__ import annotations

import ctypes
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import tilecraft as tilelang
from tilecraft.kernels import elementwise
from tilecraft.runtime import claunch
from tilecraft.runtime.fastpath import specialize

VARIANTS = ["c", "capi"]


def with_launcher(kernel, variant, monkeypatch):
    monkeypatch.setenv("TILECRAFT_LAUNCHER", variant)
    claunch.wait()  # the torch-aware build may still run in the background
    kernel.__class__ = specialize(kernel, "c")
    assert type(kernel).launcher == "c", claunch.error()
    assert claunch.module(variant).native_build() == (variant == "c")
    return kernel


@pytest.fixture(scope="module")
def cpu_add():
    return tilelang.compile(elementwise.vector_add.get_tir(1000), out_idx=[-1], target="cpu")


@pytest.mark.parametrize("variant", VARIANTS)
def test_cpu_kernel_through_the_launcher_equals_torch(cpu_add, variant, monkeypatch):
    k = with_launcher(cpu_add, variant, monkeypatch)
    assert type(k).call_namespace["fast"].native == (variant == "c")
    for _ in range(3):
        a, b = torch.randn(1000), torch.randn(1000)
        torch.testing.assert_close(k(a, b), a + b)
        c = torch.randn(1000)
        assert k(a, b, c) is c
        torch.testing.assert_close(c, a + b)
    out = k(a, b)
    assert out.dtype == torch.float32 and out.is_contiguous() and out.data_ptr() not in (a.data_ptr(), b.data_ptr())


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bad, error, words", [
    (lambda a: a.half(), TypeError, "expects dtype float32, got float16"),
    (lambda a: a[:999], ValueError, "expects shape (1000,), got (999,)"),
    (lambda a: torch.randn(2000)[::2], ValueError, "contiguous"),
    (lambda a: a.to("meta"), TypeError, "cpu device"),
    (lambda a: [1.0] * 1000, TypeError, "got list"),
])
def test_every_bad_argument_reaches_the_checked_message(cpu_add, variant, monkeypatch, bad, error, words):
    k = with_launcher(cpu_add, variant, monkeypatch)
    a, b = torch.randn(1000), torch.randn(1000)
    with pytest.raises(error, match="parameter 'B'") as e:
        k(a, bad(b))
    assert words in str(e.value)
    with pytest.raises(TypeError, match="expects 2 tensor argument"):
        k(a)


@pytest.mark.parametrize("variant", VARIANTS)
def test_what_the_fast_test_is_too_strict_for_still_runs(cpu_add, variant, monkeypatch):
    """A tensor subclass and a numpy array miss the exact-type test; the checked path runs them."""
    k = with_launcher(cpu_add, variant, monkeypatch)

    class Sub(torch.Tensor):
        pass

    a, b = torch.randn(1000), torch.randn(1000)
    torch.testing.assert_close(k(a.as_subclass(Sub), b).as_subclass(torch.Tensor), a + b)
    torch.testing.assert_close(k(a.numpy(), b), a + b)


@pytest.mark.parametrize("variant", VARIANTS)
def test_one_launcher_from_8_threads(cpu_add, variant, monkeypatch):
    k = with_launcher(cpu_add, variant, monkeypatch)
    ins = [(torch.randn(1000), torch.randn(1000)) for _ in range(8)]

    def work(ab):
        return [k(*ab) for _ in range(200)][-1]
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(work, ins))
    for (a, b), out in zip(ins, outs):
        torch.testing.assert_close(out, a + b)


# ---- the CUDA launch mode, driver replaced by a recording callback -----------------------------
LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                          ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)


class Driver:
    """A stand-in cuLaunchKernel: records each launch, answers `result`."""

    def __init__(self, nparams, result=0):
        self.calls, self.result, self.nparams = [], result, nparams
        self.fn = LAUNCH(self._launch)
        self.address = ctypes.cast(self.fn, ctypes.c_void_p).value

    def _launch(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        ptrs = [ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint64))[0] for i in range(self.nparams)]
        self.calls.append(dict(f=f, grid=(gx, gy, gz), block=(bx, by, bz), smem=smem, stream=stream or 0,
                               ptrs=ptrs, extra=extra))
        return self.result


import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from test_fastpath_cuda_nogpu import CudaLike  # noqa: E402,F401  (what the launcher's getter route reads)


@pytest.fixture(scope="module")
def cuda_add():
    return tilelang.compile(elementwise.vector_add.get_tir(1000), out_idx=[-1],
                            target={"kind": "cuda", "arch": "sm_80"})


def staged(kernel, variant, result=0, **kw):
    driver = Driver(len(kernel.params), result)
    failures, loads = [], []

    class Entry:
        handle = 0xF00D

        def launch_failed(self, *args):
            failures.append(args)
    fast = dict(entries={}, load=lambda dev: loads.append(dev) or Entry(), raw_stream=lambda dev: 0x5EA + dev,
                stream_handle=lambda s: s if isinstance(s, int) else s.cuda_stream)
    claunch.wait()
    launcher = claunch.cuda_launcher(kernel, fast, launch_address=driver.address, variant=variant, **kw)
    assert claunch.module(variant).native_build() == (variant == "c")
    assert launcher is not None, claunch.error()
    return launcher, driver, failures, loads


@pytest.mark.parametrize("variant", VARIANTS)
def test_cuda_mode_on_stand_in_tensors(cuda_add, variant):
    allocs = []

    def empty_like(t):
        allocs.append(t)
        return CudaLike(t.shape, t.dtype, 0x9000, t.get_device())
    launcher, driver, _, loads = staged(cuda_add, variant, tensor_type=CudaLike, empty_like=empty_like)
    assert launcher.native == 0  # not a torch.Tensor: read through its attributes
    la = cuda_add._launch
    a, b = CudaLike((1000,), torch.float32, 0x1000, 1), CudaLike((1000,), torch.float32, 0x2000, 1)
    out = launcher((a, b), None)
    assert allocs == [a] and out.data_ptr() == 0x9000 and loads == [1]
    call = driver.calls[-1]
    assert call == dict(f=0xF00D, grid=la._grid, block=la.block, smem=la.smem, stream=0x5EA + 1,
                        ptrs=[0x1000, 0x2000, 0x9000], extra=None)
    c = CudaLike((1000,), torch.float32, 0x7000, 1)
    assert launcher((a, b, c), 0xABC) is c
    assert driver.calls[-1]["ptrs"] == [0x1000, 0x2000, 0x7000] and driver.calls[-1]["stream"] == 0xABC
    assert loads == [1]  # the function handle is cached per device
    n = len(driver.calls)
    for bad in (dict(dtype=torch.float16), dict(shape=(999,)), dict(device=0), dict(contiguous=False)):
        kw = dict(shape=(1000,), dtype=torch.float32, ptr=0x2000, device=1)
        kw.update(bad)
        assert launcher((a, CudaLike(**kw)), None) is claunch.MISS
    assert launcher((a,), None) is claunch.MISS and launcher([a, b], None) is claunch.MISS
    assert len(driver.calls) == n  # no miss launched anything


@pytest.mark.parametrize("variant", VARIANTS)
def test_cuda_mode_on_torch_tensors(cuda_add, variant):
    """CPU tensors read as at::Tensor (torch-aware build) or through Python, device test `is_cpu`."""
    launcher, driver, _, loads = staged(cuda_add, variant, device_attr="is_cpu")
    assert launcher.native == (variant == "c") and launcher.nparams == 3
    a, b = torch.randn(1000), torch.randn(1000)
    out = launcher((a, b), None)
    assert isinstance(out, torch.Tensor) and out.shape == (1000,) and out.dtype == torch.float32
    assert driver.calls[-1]["ptrs"] == [a.data_ptr(), b.data_ptr(), out.data_ptr()]
    assert driver.calls[-1]["stream"] == 0x5EA - 1 and loads == [-1]  # a CPU tensor's get_device() is -1
    for bad in (b.double(), b[:999], torch.randn(2000)[::2], b.to("meta"), b.to_sparse()):
        assert launcher((a, bad), None) is claunch.MISS
    assert len(driver.calls) == 1


def test_the_torch_aware_build_allocates_outputs_of_their_own_dtype_and_shape():
    """The torch-aware build makes outputs in C (at::empty's operator, wrapped as a torch.Tensor):
    a 2-D float16 output of a float32 input comes back as such, contiguous, on the inputs' device,
    and its pointer is what reaches the driver (the header-light build finds torch.Tensor's
    at::Tensor itself: claunch.cpp)."""
    import tilecraft.language as T

    @tilelang.jit(out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    def to_half(M=16, N=24):
        @T.prim_func
        def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float16")):
            with T.Kernel(M, threads=32) as bx:
                for j in T.Parallel(N):
                    Y[bx, j] = T.cast(X[bx, j], "float16")
        return main

    launcher, driver, _, _ = staged(to_half(), "c", device_attr="is_cpu")
    assert launcher.native == 1
    x = torch.randn(16, 24)
    for _ in range(2):
        out = launcher((x,), None)
        assert type(out) is torch.Tensor and out.dtype == torch.float16 and out.shape == (16, 24)
        assert out.is_contiguous() and out.device == x.device and not out.requires_grad
        assert driver.calls[-1]["ptrs"] == [x.data_ptr(), out.data_ptr()]
    assert launcher((x.half(),), None) is claunch.MISS and launcher((torch.randn(24, 16).t(),), None) is claunch.MISS


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_failed_cuda_launch_goes_to_on_error(cuda_add, variant):
    launcher, driver, failures, _ = staged(cuda_add, variant, result=700, device_attr="is_cpu")
    a, b = torch.randn(1000), torch.randn(1000)
    out = launcher((a, b), 0x77)
    err, grid, block, smem, stream, ptrs = failures[0]
    assert err == 700 and stream == 0x77 and ptrs == [a.data_ptr(), b.data_ptr(), out.data_ptr()]


def test_threads_share_one_cuda_launcher_without_mixing_arguments(cuda_add):
    launcher, driver, _, _ = staged(cuda_add, "c", device_attr="is_cpu")
    ins = [(torch.randn(1000), torch.randn(1000)) for _ in range(8)]
    start = threading.Barrier(8)

    def work(ab):
        start.wait()
        return [(launcher(ab, None).data_ptr(), ab[0].data_ptr(), ab[1].data_ptr()) for _ in range(100)]
    with ThreadPoolExecutor(8) as pool:
        expected = [t for got in pool.map(work, ins) for t in got]
    assert sorted(tuple(c["ptrs"]) for c in driver.calls) == sorted((x, y, o) for o, x, y in expected)


def test_python_call_when_asked(cpu_add, monkeypatch):
    monkeypatch.setenv("TILECRAFT_LAUNCHER", "python")
    cpu_add.__class__ = specialize(cpu_add)
    assert type(cpu_add).launcher == "python" and "fast" not in type(cpu_add).call_namespace
    a, b = torch.randn(1000), torch.randn(1000)
    torch.testing.assert_close(cpu_add(a, b), a + b)


UPGRADE = r"""
import torch, tilecraft as tilelang
from tilecraft.kernels import elementwise
from tilecraft.runtime import claunch
k = tilelang.compile(elementwise.vector_add.get_tir(1000), out_idx=[-1], target="cpu")
first = type(k).call_namespace["fast"]
assert claunch.building() and not claunch.module().native_build(), "the first kernel waits for no compiler"
a, b = torch.randn(1000), torch.randn(1000)
torch.testing.assert_close(k(a, b), a + b)
claunch.wait()
now = type(k).call_namespace["fast"]
assert now is not first and type(now) is claunch.module("c").Launcher and claunch.module().native_build(), claunch.error()
torch.testing.assert_close(k(a, b), a + b)
print("OK")
"""


def test_a_fresh_machine_builds_the_torch_aware_launcher_in_the_background(tmp_path):
    """First kernel: the Python.h-only launcher at once; then the torch-aware build finishes in
    a thread and the kernel is moved onto it (a subprocess: this one has both loaded already)."""
    import os
    import sys

    from fresh_python import run_python
    if claunch._torch_flags() is None:
        pytest.skip("this torch install has no headers: there is no torch-aware build to wait for")
    env = dict(os.environ, TILECRAFT_LAUNCHER_DIR=str(tmp_path / "launcher"), TILECRAFT_CACHE_DIR=str(tmp_path / "c"))
    env.pop("TILECRAFT_LAUNCHER", None)
    proc = run_python([sys.executable, "-c", UPGRADE], env=env, timeout=300)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]


def test_a_process_waits_for_the_launcher_another_one_is_building(tmp_path, monkeypatch):
    """Processes that start together (pytest-xdist workers, the ranks of a job) build the launcher
    once: while one holds the build lock, another waits and then loads that library."""
    from filelock import FileLock

    from tilecraft import env
    monkeypatch.setenv("TILECRAFT_LAUNCHER_DIR", str(tmp_path))
    path = claunch._path([])   # the Python.h-only variant: <1 s to build
    path.parent.mkdir(parents=True)
    real, builds, loaded = claunch._build, [], []
    monkeypatch.setattr(claunch, "_build", lambda *a: (builds.append(a), real(*a)))
    with FileLock(str(path.parent / ".build.lock")):   # "another process" is building it
        waiter = threading.Thread(target=lambda: loaded.append(claunch._build_and_load([])))
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive() and not builds, "it waits for the lock instead of compiling"
        real(claunch.SOURCE, path, env.cxx(), [])      # the other process's library lands
    waiter.join(120)
    assert not waiter.is_alive() and not builds, "nothing was compiled a second time"
    assert loaded and loaded[0] is not None and hasattr(loaded[0], "Launcher")

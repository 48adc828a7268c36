"""The compiled launcher (runtime/claunch.cpp): building it once, and making one per kernel.

Before: a static kernel whose generated call (runtime/fastpath.py) qualifies: the CPU target's
entry, or a CUDA kernel whose arguments are all pointers with a constant grid.
After: `cpu_launcher(kernel)` / `cuda_launcher(kernel, ...)` return a `_tclaunch.Launcher` that
does the whole cached call in C (every check of the generated Python call, output allocation,
the launch), or None when the extension cannot be had; the caller then keeps the Python call.

The extension is C++, compiled with the CPU target's compiler (`env.cxx()`) on first use and kept
under ``<TILECRAFT_LAUNCHER_DIR>/<key>/`` (default ~/.cache/tilecraft-launcher; the key: its
source, this Python's version and ABI, the compiler and flags, torch's version), loaded once per
process.  It lives apart from the kernel cache: a fresh TILECRAFT_CACHE_DIR (a cold-compile
measurement, a test) must not pay for rebuilding it.  It is built one of two ways:
with torch's headers and libraries (``-DTC_WITH_TORCH``: tensor metadata read from the
at::Tensor, outputs from at::empty; ~3 s once), else against Python.h only (tensor
attributes read through Python calls; <1 s once).  No CUDA headers either way.  When the
torch-aware build is not on disk yet, the first kernels get the Python.h-only launcher at once
while the torch-aware one builds in a background thread; they are moved onto it when it is
loaded (`wait()` blocks for it: benchmarks and tests that time the users' call use it).
libcuda is not linked: the CUDA launcher gets cuLaunchKernel's address from the ctypes handle
runtime/cuda_driver.py already resolves (dlopen of libcuda.so.1), so the module imports and the
CPU target uses it on machines with no GPU.  ``TILECRAFT_LAUNCHER=capi`` asks for the
Python.h-only build, ``TILECRAFT_LAUNCHER=python`` for no compiled launcher (`mode()`).
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import subprocess
import sys
import sysconfig
import tempfile
import threading
import weakref
from pathlib import Path

from .. import env

__all__ = ["MISS", "module", "mode", "enabled", "error", "wait", "building", "pending", "cpu_launcher",
           "cuda_launcher", "stub_launch_address"]

log = logging.getLogger(__name__)
SOURCE = Path(__file__).with_name("claunch.cpp")


class _Miss:
    """What a Launcher returns when a check fails: run the general checked path instead."""

    __slots__ = ()

    def __repr__(self):
        return "MISS"


MISS = _Miss()
_locks = {"torch": threading.Lock(), "capi": threading.Lock()}  # one per variant: a background
_start = threading.Lock()                                        # build never blocks the other
_state: dict = {}       # variant ("torch", "capi") -> the loaded extension, or None when it failed
_errors: list = []      # why a variant failed
_builder: list = [None]  # the thread building the torch-aware variant
_pending = weakref.WeakSet()  # kernels to move onto the torch-aware variant once it is built


def mode() -> str:
    """``TILECRAFT_LAUNCHER`` (`env.launcher()`): "c" (default: the torch-aware build, else the
    Python.h-only one), "capi" (the Python.h-only build), or "python" (no compiled launcher)."""
    return env.launcher()


def enabled() -> bool:
    """False when ``TILECRAFT_LAUNCHER=python`` asks for the Python call."""
    return mode() != "python"


def _torch_flags() -> list | None:
    """Compiler flags for the torch-aware build (torch's headers and libraries), or None."""
    torch = _torch()
    root = Path(torch.__file__).resolve().parent
    inc, lib = root / "include", root / "lib"
    if not all((inc / h).exists() for h in ("ATen/core/Tensor.h", "ATen/ops/empty_ops.h", "torch/csrc/Dtype.h")) \
            or not lib.is_dir():
        return None
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    return ["-std=c++20", "-DTC_WITH_TORCH", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-I", str(inc),
            "-I", str(inc / "torch" / "csrc" / "api" / "include"), "-L", str(lib), "-lc10", "-ltorch_cpu",
            "-ltorch_python", f"-Wl,-rpath,{lib}", "-w"]


def _key(source: bytes, cxx: str, flags: list) -> str:
    h = hashlib.sha256(source)
    for part in (sys.version, sysconfig.get_config_var("EXT_SUFFIX") or "", cxx, *flags):
        h.update(b"\0" + part.encode())
    if flags:
        h.update(_torch().__version__.encode())
    return h.hexdigest()[:24]


def _build(source_path: Path, out: Path, cxx: str, flags: list) -> None:
    paths = sysconfig.get_paths()
    incs = []
    for inc in (paths.get("include"), paths.get("platinclude")):
        if inc and inc not in incs:
            incs += ["-I", inc]
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        cmd = [cxx, "-O2", "-shared", "-fPIC", *incs, str(source_path), "-o", tmp, *flags]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{(proc.stderr or proc.stdout)[-2000:]}")
        os.replace(tmp, out)   # atomic: a process that races us loads a whole library or builds its own
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _load(path: Path):
    loader = importlib.machinery.ExtensionFileLoader("tilecraft._tclaunch", str(path))
    spec = importlib.util.spec_from_file_location("tilecraft._tclaunch", str(path), loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def _path(flags: list) -> Path:
    return Path(env.launcher_dir()) / _key(SOURCE.read_bytes(), env.cxx(), flags) / "_tclaunch.so"


def _build_and_load(flags: list):
    path = _path(flags)
    if not path.exists():
        try:
            # one build per machine: processes that start together (pytest-xdist workers, ranks of a
            # job) wait for the first one's library instead of each compiling their own (~3 CPU-s
            # for the torch-aware variant); the lock is released if its holder dies
            from filelock import FileLock
            path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(path.parent / ".build.lock")):
                if not path.exists():
                    _build(SOURCE, path, env.cxx(), flags)
        except OSError:  # an unwritable directory: build for this process only
            path = Path(tempfile.mkdtemp(prefix="tilecraft-launcher-")) / "_tclaunch.so"
            _build(SOURCE, path, env.cxx(), flags)
    return _load(path)


def _try(name: str, get_flags):
    """Build (if needed) and load one variant, once per process; None (reason in `error()`) on failure."""
    if name not in _state:
        with _locks[name]:
            if name not in _state:
                mod = None
                try:
                    flags = get_flags()
                    if flags is None:
                        raise RuntimeError("torch's headers are not installed")
                    mod = _build_and_load(flags)
                except Exception as e:  # noqa: BLE001 - no compiler, no Python.h: a slower path stays
                    _errors.append(f"{name} build: {type(e).__name__}: {e}")
                    log.info("tilecraft: compiled launcher (%s) unavailable: %s", name, _errors[-1])
                _state[name] = mod
    return _state[name]


def _capi():
    return _try("capi", lambda: [])


def _torch_aware():
    return _try("torch", _torch_flags)


def _background_torch_build() -> None:
    """Build the torch-aware variant in a thread (~3 s of the compiler, once per machine), then
    move every kernel specialized meanwhile (on the Python.h-only variant) onto it."""
    mod = _torch_aware()
    if mod is None:
        return
    from .fastpath import specialize
    for kernel in list(_pending):
        try:
            cls = specialize(kernel)
            if cls is not None:
                kernel.__class__ = cls
        except Exception as e:  # noqa: BLE001 - the kernel keeps the launcher it has
            log.info("tilecraft: kernel %s keeps its launcher: %s", getattr(kernel, "name", "?"), e)
    _pending.clear()


def module(variant: str | None = None):
    """The loaded extension, or None when it cannot be built or loaded.  `variant` (default:
    `mode()`): "capi" (Python.h-only, built in the foreground, <1 s once) or "c": the torch-aware
    build when it is on disk or built, else the Python.h-only one while the torch-aware one
    builds in a background thread (`wait()` blocks until it is done)."""
    variant = variant or mode()
    if variant == "python":
        return None
    if variant == "capi":
        return _capi()
    mod = _state.get("torch")
    if mod is not None or "torch" in _state:
        return mod or _capi()
    try:
        flags = _torch_flags()
        ready = flags is not None and _path(flags).exists()
    except Exception:  # noqa: BLE001
        ready = True   # let _try record why
    if ready:
        return _torch_aware() or _capi()
    with _start:
        if _builder[0] is None:
            _builder[0] = threading.Thread(target=_background_torch_build, name="tilecraft-launcher-build",
                                           daemon=True)
            _builder[0].start()
    return _capi()


def wait(timeout: float | None = None):
    """Block until the torch-aware build (if one is running) is done; the module `module()` gives then."""
    if mode() == "c":
        module("c")
        t = _builder[0]
        if t is not None:
            t.join(timeout)
    return module()


def building() -> bool:
    """Whether the torch-aware variant is being built in the background right now."""
    t = _builder[0]
    return t is not None and t.is_alive()


def pending(kernel) -> None:
    """Remember a kernel that got the Python.h-only launcher while the torch-aware one builds."""
    if _state.get("torch") is None and building():
        _pending.add(kernel)


def error() -> str | None:
    """What failed while building the extension (None when nothing did or nothing was tried)."""
    return "; ".join(_errors) or None


def stub_launch_address() -> int:
    """Address of a no-op with cuLaunchKernel's signature (the driver stubbed out: profiles, tests)."""
    mod = module()
    if mod is None:
        raise RuntimeError(f"tilecraft: the compiled launcher is unavailable ({error()})")
    return mod.stub_launch_address()


def _signature(kernel, tensor_type):
    params = kernel.params
    taken = [i for i, p in enumerate(params) if not p.is_output]
    twins = []
    for p in params:
        twin = -1
        if p.is_output:
            twin = next((j for j in taken if tuple(params[j].shape) == tuple(p.shape)
                         and params[j].dtype == p.dtype), -1)
        twins.append(twin)
    return (tensor_type, tuple(p.dtype for p in params), tuple(tuple(int(s) for s in p.shape) for p in params),
            tuple(bool(p.is_output) for p in params), tuple(twins))


def _no_stream(_):
    raise AssertionError("the CPU launcher reads no stream")


def cpu_launcher(kernel, variant: str | None = None):
    """The Launcher of a static CPU-target kernel, or None without the extension."""
    mod = module(variant)
    if mod is None or len(kernel.params) > 64:
        return None
    torch = _torch()
    la = kernel._launch
    params, cpu = kernel.params, kernel._cpu_device

    def alloc(i: int, dev: int):
        p = params[i]
        return torch.empty(tuple(p.shape), dtype=p.dtype, device=cpu)

    def on_error(rc, dev, stream, ptrs):
        kernel._cpu_failed(rc)

    return mod.Launcher(*_signature(kernel, torch.Tensor), "is_cpu", False, torch.empty_like, alloc,
                        0, ctypes.cast(la.fn, ctypes.c_void_p).value, ctypes.addressof(la.dims),
                        (1, 1, 1), (1, 1, 1), 0, _no_stream, _no_stream, _no_stream, on_error, MISS)


def cuda_launcher(kernel, fast: dict, launch_address: int | None = None, tensor_type=None,
                  empty_like=None, device_attr: str = "is_cuda", variant: str | None = None):
    """The Launcher of a static CUDA kernel (`fast`: `CudaLauncher.fast_launch_state()`), or None
    without the extension or without libcuda.  `launch_address` (default: libcuda's
    cuLaunchKernel), `tensor_type`, `empty_like` and `device_attr` are there for stand-ins:
    the tests and benchmarks/launch_profile.py run the same C code with no GPU; `variant` as
    in `module()`."""
    mod = module(variant)
    if mod is None or len(kernel.params) > 64:
        return None
    if launch_address is None:
        from .cuda_driver import libcuda_launch
        fn = libcuda_launch()
        if fn is None:
            return None
        launch_address = ctypes.cast(fn, ctypes.c_void_p).value
    torch = _torch()
    la = kernel._launch
    params = kernel.params
    entries, load_entry = fast["entries"], fast["load"]
    devices: dict = {}

    def load(dev: int) -> int:
        return int(load_entry(dev).handle)

    def alloc(i: int, dev: int):
        p = params[i]
        d = devices.get(dev) or devices.setdefault(dev, torch.device("cuda", dev))
        return torch.empty(tuple(p.shape), dtype=p.dtype, device=d)

    def on_error(err, dev, stream, ptrs):
        """A rejected launch: the entry's slow path (right context, retry) or the driver's error."""
        (entries.get(dev) or load_entry(dev)).launch_failed(err, la._grid, la.block, la.smem, stream, ptrs)

    return mod.Launcher(*_signature(kernel, tensor_type or torch.Tensor), device_attr, True,
                        empty_like or torch.empty_like, alloc, 1, launch_address, None, la._grid, la.block,
                        la.smem, load, fast["raw_stream"], fast["stream_handle"], on_error, MISS)


def _torch():
    from .args import _load_torch
    return _load_torch()

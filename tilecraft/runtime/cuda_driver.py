"""Thin glue over the CUDA driver API (``cuda.bindings.driver``): contexts, modules, launches.

Contexts: torch uses each device's *primary* context through the runtime API; we retain the same
primary context, so memory from ``tensor.data_ptr()`` and torch's streams are valid for our
kernels.  A thread that has never touched the runtime has no current context, and driver calls
(unlike runtime ones) do not create one implicitly: :func:`ensure_context` makes it current.

Launch hot path: argument packing is precomputed per signature (:class:`ArgPacker`: one byte
buffer holding every argument at its natural alignment, plus the ``void*[]`` array pointing into
it), so a launch is one ``struct.pack_into`` and one ``cuLaunchKernel``.  Everything here is
imported lazily, so ``import tilecraft.runtime`` works without a GPU or without cuda-bindings;
the first call that needs the driver raises :class:`CudaError` with a clear message instead.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import struct
import threading
from typing import Any, Sequence

__all__ = ["CudaError", "check", "ensure_context", "CudaModule", "CudaFunction", "ArgPacker",
           "DeviceProperties", "device_properties", "libcuda_launch"]

_DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in via a func attribute


class CudaError(RuntimeError):
    """A CUDA driver call failed (or the driver is missing); the message names the call, the
    kernel when there is one, and the driver's error name and string."""


@functools.lru_cache(maxsize=None)
def _drv():
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise CudaError(f"cuda-bindings is not installed ({e}); `pip install cuda-bindings` "
                        "to run CUDA kernels") from None
    return driver


@functools.lru_cache(maxsize=None)
def libcuda_launch():
    """libcuda's ``cuLaunchKernel`` as a ctypes function without argtypes (callers pass ``c_void_p``
    for the handle, stream and parameter array and small ints for the rest, so ctypes converts
    nothing per call and no wrapper object is built; benchmarks/launch_overhead.py times it
    against cuda-bindings' ``cuLaunchKernel``).
    ``libcuda.so.1`` is the library cuda-bindings loaded (same soname, one copy per process).
    None when it cannot be loaded (launches then go through cuda-bindings)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuLaunchKernel
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    return fn


def _error_text(drv, err) -> str:
    try:
        name = drv.cuGetErrorName(err)[1]
        desc = drv.cuGetErrorString(err)[1]
        return f"{name.decode()}: {desc.decode()}"
    except Exception:  # the error code itself may be unknown to this driver
        return f"CUresult {int(err)}"


def check(result: tuple, what: str, kernel_name: str | None = None) -> Any:
    """Unwrap a ``cuda.bindings`` result tuple ``(CUresult, *values)``: raise :class:`CudaError`
    when the CUresult is not CUDA_SUCCESS, else return the single value, a tuple of values, or
    None."""
    err = result[0]
    if err:  # CUresult is an int enum and CUDA_SUCCESS == 0
        who = f" for kernel '{kernel_name}'" if kernel_name else ""
        raise CudaError(f"{what} failed{who}: {_error_text(_drv(), err)}")
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


_init_lock = threading.Lock()
_initialised = False
_primary_ctx: dict[int, Any] = {}


def _init_driver() -> Any:
    """cuInit once per process; a missing driver library becomes a CudaError, not a crash."""
    global _initialised
    drv = _drv()
    if _initialised:
        return drv
    with _init_lock:
        if not _initialised:
            try:
                result = drv.cuInit(0)
            except Exception as e:  # cuda.pathfinder raises when libcuda.so cannot be loaded
                raise CudaError(f"the CUDA driver is not available ({type(e).__name__}: {e}); "
                                "a GPU and the NVIDIA driver are needed to run CUDA kernels") from None
            check(result, "cuInit")
            _initialised = True
    return drv


def _default_device() -> int:
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.current_device()
    except Exception:
        pass
    return 0


def ensure_context(device: int | None = None) -> Any:
    """Return the primary context of ``device`` (default: torch's current device), initialising
    torch's CUDA state first so torch and tilecraft share it, and make it current on this thread
    when the thread has none.  An existing current context of another device is left alone."""
    drv = _init_driver()
    if device is None:
        device = _default_device()
    ctx = _primary_ctx.get(device)
    if ctx is None:
        try:
            import torch
            if torch.cuda.is_available():
                torch.cuda.init()
        except Exception:
            pass
        dev = check(drv.cuDeviceGet(device), "cuDeviceGet")
        with _init_lock:
            ctx = _primary_ctx.get(device)
            if ctx is None:
                # Retained for the life of the process: it is torch's context too.
                ctx = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
                _primary_ctx[device] = ctx
    current = check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if current is None or int(current) == 0:
        check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


class _ContextScope:
    """Make ``ctx`` current for a block if it is not already (push/pop, so the caller's current
    context — e.g. torch's on another device — is restored afterwards)."""

    def __init__(self, drv, ctx):
        self.drv, self.ctx, self.pushed = drv, ctx, False

    def __enter__(self):
        current = check(self.drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if current is None or int(current) != int(self.ctx):
            check(self.drv.cuCtxPushCurrent(self.ctx), "cuCtxPushCurrent")
            self.pushed = True
        return self

    def __exit__(self, *exc):
        if self.pushed:
            self.drv.cuCtxPopCurrent()


# kind -> (struct format, size); sizes equal alignments for all of these.
_ARG_KINDS = {
    "ptr": ("Q", 8), "pointer": ("Q", 8), "handle": ("Q", 8),
    "int8": ("b", 1), "uint8": ("B", 1), "bool": ("?", 1),
    "int16": ("h", 2), "uint16": ("H", 2), "float16": ("e", 2),
    "int32": ("i", 4), "uint32": ("I", 4), "float32": ("f", 4), "float": ("f", 4),
    "int64": ("q", 8), "uint64": ("Q", 8), "float64": ("d", 8), "double": ("d", 8),
    # a TMA tensor map (runtime/tma.py), 128 bytes by value; the driver places it at the kernel
    # parameter's 64-byte alignment, here it only needs room
    "tma_desc": ("128s", 128),
}


class ArgPacker:
    """Precomputed kernel-argument layout for one signature (a tuple of kinds such as
    ``("ptr", "ptr", "int32")``).  :meth:`pack` writes the values into a persistent buffer;
    :attr:`address` is the ``void**`` to hand to cuLaunchKernel.  The driver copies the
    arguments at launch, so the buffer can be reused immediately after."""

    def __init__(self, kinds: Sequence[str]):
        fmt, offsets, offset = "<", [], 0
        for kind in kinds:
            try:
                code, size = _ARG_KINDS[kind]
            except KeyError:
                raise ValueError(f"unknown kernel argument kind {kind!r}; expected one of "
                                 f"{sorted(_ARG_KINDS)}") from None
            pad = (-offset) % size
            fmt += "x" * pad + code
            offset += pad
            offsets.append(offset)
            offset += size
        self.kinds = tuple(kinds)
        self._struct = struct.Struct(fmt)
        self._buffer = (ctypes.c_uint64 * max(1, (offset + 7) // 8))()  # 8-byte aligned storage
        base = ctypes.addressof(self._buffer)
        self._pointers = (ctypes.c_void_p * max(1, len(offsets)))(*[base + o for o in offsets])
        self.address = ctypes.addressof(self._pointers) if offsets else 0
        self.lock = threading.Lock()  # pack + launch must not interleave between threads

    def pack(self, values: Sequence[Any]) -> None:
        self._struct.pack_into(self._buffer, 0, *values)

    def raw(self) -> bytes:
        """The packed argument bytes (for tests and debugging)."""
        return bytes(self._buffer)[: self._struct.size]


class CudaFunction:
    """One kernel of a loaded module.  Launch with :meth:`launch`; for the lowest overhead get an
    :class:`ArgPacker` once with :meth:`packer` and call :meth:`launch_packed`."""

    def __init__(self, module: "CudaModule", handle: Any, name: str):
        self.module, self.handle, self.name = module, handle, name
        self._packers: dict[tuple[str, ...], ArgPacker] = {}
        self._max_dynamic_shared = _DEFAULT_DYNAMIC_SMEM_LIMIT

    def set_max_dynamic_shared(self, nbytes: int) -> None:
        """Allow up to ``nbytes`` of dynamic shared memory (needed above 48 KiB, up to the
        device's opt-in limit, e.g. 227 KiB on H100/H200)."""
        drv = self.module._drv
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        with _ContextScope(drv, self.module.context):
            check(drv.cuFuncSetAttribute(self.handle, attr, int(nbytes)),
                  f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes})", self.name)
        self._max_dynamic_shared = max(int(nbytes), _DEFAULT_DYNAMIC_SMEM_LIMIT)

    def packer(self, kinds: Sequence[str]) -> ArgPacker:
        kinds = tuple(kinds)
        p = self._packers.get(kinds)
        if p is None:
            p = self._packers[kinds] = ArgPacker(kinds)
        return p

    def launch(self, grid: Sequence[int], block: Sequence[int], shared_bytes: int, stream: int,
               args: Sequence[tuple[str, Any]]) -> None:
        """Launch on ``stream`` (an int handle, e.g. ``torch.cuda.current_stream().cuda_stream``)
        with ``args`` as ``(kind, value)`` pairs; pointers are ints from ``tensor.data_ptr()``."""
        packer = self.packer([k for k, _ in args])
        self.launch_packed(grid, block, shared_bytes, stream, packer, [v for _, v in args])

    def launch_packed(self, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
                      stream: int, packer: ArgPacker, values: Sequence[Any]) -> None:
        if shared_bytes > self._max_dynamic_shared:
            self.set_max_dynamic_shared(shared_bytes)
        gx, gy, gz = grid
        bx, by, bz = block
        with packer.lock:
            try:
                packer.pack(values)
            except struct.error as e:
                raise CudaError(f"kernel '{self.name}': cannot pack arguments {list(values)!r} "
                                f"as {packer.kinds}: {e}") from None
            (err,) = self.module._drv.cuLaunchKernel(self.handle, gx, gy, gz, bx, by, bz,
                                                     shared_bytes, stream, packer.address, 0)
            if err:
                self._relaunch_in_context(err, grid, block, shared_bytes, stream, packer)

    def _relaunch_in_context(self, err, grid, block, shared_bytes, stream, packer) -> None:
        """Slow path after a failed launch: if this thread's current context is not the module's
        (a fresh thread, or another device current), launch again inside the right one; else
        report the original error."""
        drv = self.module._drv
        current = check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if current is not None and int(current) == int(self.module.context):
            check((err,), "cuLaunchKernel", self.name)
        if current is None or int(current) == 0:
            # A thread that never touched CUDA: adopt the context for good (as the runtime API
            # would), so its next launches take the fast path.
            check(drv.cuCtxSetCurrent(self.module.context), "cuCtxSetCurrent")
        with _ContextScope(drv, self.module.context):
            check(drv.cuLaunchKernel(self.handle, *grid, *block, shared_bytes, stream,
                                     packer.address, 0), "cuLaunchKernel", self.name)

    def __repr__(self) -> str:
        return f"CudaFunction({self.name!r}, device={self.module.device})"


class CudaModule:
    """A cubin loaded into the primary context of one device (default: torch's current one).
    Functions are looked up by their (``extern "C"``, unmangled) names."""

    def __init__(self, cubin: bytes, device: int | None = None):
        self._drv = _init_driver()
        self.device = _default_device() if device is None else device
        self.context = ensure_context(self.device)
        self._functions: dict[str, CudaFunction] = {}
        image = ctypes.create_string_buffer(bytes(cubin), len(cubin))  # alive during the call
        with _ContextScope(self._drv, self.context):
            self.handle = check(self._drv.cuModuleLoadData(ctypes.addressof(image)),
                                "cuModuleLoadData")

    def function(self, name: str) -> CudaFunction:
        fn = self._functions.get(name)
        if fn is None:
            handle = check(self._drv.cuModuleGetFunction(self.handle, name.encode()),
                           "cuModuleGetFunction", name)
            fn = self._functions[name] = CudaFunction(self, handle, name)
        return fn

    def __del__(self):
        handle = getattr(self, "handle", None)
        if handle is not None:
            try:
                with _ContextScope(self._drv, self.context):
                    self._drv.cuModuleUnload(handle)
            except Exception:  # interpreter shutdown or a dead context: nothing left to free
                pass


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    index: int
    name: str
    sm_count: int
    cc_major: int
    cc_minor: int
    max_shared_per_block: int
    max_shared_per_block_optin: int
    max_shared_per_sm: int
    max_threads_per_block: int
    max_registers_per_block: int
    l2_cache_bytes: int
    warp_size: int

    @property
    def arch(self) -> str:
        """``sm_XY`` of the device (without the ``a`` suffix; the target adds it for wgmma)."""
        return f"sm_{self.cc_major}{self.cc_minor}"


@functools.lru_cache(maxsize=None)
def device_properties(device_index: int = 0) -> DeviceProperties:
    """Static properties of a device (cached): SM count, compute capability, shared-memory
    limits (the opt-in limit is what a block may use after set_max_dynamic_shared)."""
    drv = _init_driver()
    dev = check(drv.cuDeviceGet(device_index), "cuDeviceGet")
    A = drv.CUdevice_attribute

    def attr(name: str) -> int:
        return int(check(drv.cuDeviceGetAttribute(getattr(A, name), dev), f"cuDeviceGetAttribute({name})"))

    raw_name = check(drv.cuDeviceGetName(256, dev), "cuDeviceGetName")
    return DeviceProperties(
        index=device_index,
        name=bytes(raw_name).split(b"\0", 1)[0].decode(errors="replace"),
        sm_count=attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        cc_major=attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
        cc_minor=attr("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
        max_shared_per_block=attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"),
        max_shared_per_block_optin=attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        max_shared_per_sm=attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        max_threads_per_block=attr("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
        max_registers_per_block=attr("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK"),
        l2_cache_bytes=attr("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
        warp_size=attr("CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
    )

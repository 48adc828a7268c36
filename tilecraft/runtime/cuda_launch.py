"""`CudaLauncher`: the host side of a compiled CUDA kernel, in Python, built for a short hot path.

`JITKernel` checks the arguments and allocates outputs, then calls the launcher with the tensors
(every parameter, in signature order) and the values of the symbolic dimensions.  The launcher
turns those into one ``cuLaunchKernel``:

- everything that does not depend on the call is done once: the kernel name, block, dynamic
  shared memory and the argument layout (an :class:`~tilecraft.runtime.cuda_driver.ArgPacker`)
  come from ``artifact.meta`` (the launch record, tilecraft/launch.py); the grid is a constant
  tuple when every entry is an int, else the record's `Grid`, whose expression trees are evaluated
  with the symbol values (no Python text is compiled);
- the cubin is loaded lazily on the first call, on the device of the first tensor, and cached per
  device (a module belongs to one context); kernels above 48 KiB of dynamic shared memory opt in
  with ``cuFuncSetAttribute`` at load time;
- per call: the device index, one ``data_ptr()`` per tensor, the symbol values, the stream
  (torch's current raw stream unless one is given), one slice assignment into the argument
  slots and the ``cuLaunchKernel`` call itself, through ctypes straight into libcuda (see
  :class:`_DeviceEntry`).  On an H200 VM torch.add takes ~7-8 us of host time, so every Python
  operation here counts; static kernels skip this method altogether: `runtime/fastpath.py`
  generates their whole call (checks, allocation, launch) from ``fast_launch_state()``.

Every failure (missing symbol, a grid of 0 or too many blocks, a rejected launch, too much shared
memory) raises :class:`~tilecraft.runtime.cuda_driver.CudaError` naming the kernel; a rejected
launch leaves the CUDA context usable for later kernels.
"""
from __future__ import annotations

import ctypes
import operator
import threading

from .cuda_driver import CudaError, libcuda_launch

__all__ = ["CudaLauncher", "GRID_LIMITS", "DEFAULT_SMEM_LIMIT"]

GRID_LIMITS = (2**31 - 1, 65535, 65535)  # gridDim.x / .y / .z on every sm_30+ device
DEFAULT_SMEM_LIMIT = 48 * 1024           # above this the kernel must opt in


def _raw_stream_getter():
    """The fastest way to read torch's current stream handle for a device index: the private
    ``torch._C._cuda_getCurrentRawStream`` (what Triton and Inductor use), else the public API."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda dev: torch.cuda.current_stream(dev).cuda_stream


def _check_block(block, kernel: str) -> tuple:
    try:
        block = tuple(int(b) for b in block)
    except (TypeError, ValueError):
        raise CudaError(f"kernel '{kernel}': block {block!r} must be three ints") from None
    if len(block) != 3:
        raise CudaError(f"kernel '{kernel}': block {block!r} must have three entries")
    return block


class CudaLauncher:
    """Launch one compiled CUDA kernel (see the module docstring for what is precomputed)."""

    def __init__(self, artifact, func, params, symbols):
        meta = artifact.meta or {}
        name = getattr(func, "name", None) or meta.get("kernel") or "kernel"
        self.name = name
        self.kernel_name = meta.get("kernel_name") or name
        self._binary = artifact.binary or b""
        self._binary_path = getattr(artifact, "binary_path", "") or ""
        self.symbols = list(symbols)
        self.nparams = len(params)
        kinds = meta.get("param_kinds")
        if kinds is None:
            kinds = ["ptr"] * self.nparams + ["int32"] * len(self.symbols)
        self.param_kinds = tuple(kinds)
        # tensor maps the kernel takes after its symbols (a TMA main loop): built per call from
        # the tensors they describe (runtime/tma.py), cached by address, shape and strides
        self._tma = [dict(t) for t in meta.get("tma", [])]
        self._tma_cache: dict = {}
        self._param_names = [getattr(p, "name", f"#{i}") for i, p in enumerate(params)]
        n_ptr = sum(1 for k in self.param_kinds if k in ("ptr", "pointer", "handle"))
        if (n_ptr != self.nparams or len(self.param_kinds) != self.nparams + len(self.symbols) + len(self._tma)
                or any(k != "tma_desc" for k in self.param_kinds[len(self.param_kinds) - len(self._tma):])):
            raise CudaError(f"kernel '{name}': param_kinds {list(self.param_kinds)} do not match "
                            f"{self.nparams} tensor parameter(s) followed by symbols {self.symbols}"
                            + (f" and {len(self._tma)} tensor map(s)" if self._tma else ""))
        # each symbol's parameter width (int32, or int64 for a T.symbolic(..., "int64")): its range check
        self._symbol_kinds = tuple(self.param_kinds[self.nparams:self.nparams + len(self.symbols)])
        if any(k not in _INT_LIMITS for k in self._symbol_kinds):
            raise CudaError(f"kernel '{name}': symbol parameter kinds {list(self._symbol_kinds)} must be int32 or int64")
        self.block = _check_block(meta.get("block", (1, 1, 1)), name)
        self.smem = int(meta.get("smem_bytes", 0) or 0)
        if self.smem < 0:
            raise CudaError(f"kernel '{name}': negative dynamic shared memory {self.smem}")

        # Symbol values in signature order, as one C-level call (itemgetter returns a bare value
        # for one key, a tuple for several).
        if not self.symbols:
            self._symbol_values = None
        elif len(self.symbols) == 1:
            getter = operator.itemgetter(self.symbols[0])
            self._symbol_values = lambda s: (getter(s),)
        else:
            self._symbol_values = operator.itemgetter(*self.symbols)

        from ..launch import GridError, grid_of_meta
        try:
            self._grid_of = grid_of_meta(meta)   # launch.Grid: evaluated per call, nothing compiled
        except GridError as e:
            raise CudaError(f"kernel '{name}': {e}") from None
        self.grid_spec = list(self._grid_of.text)
        cluster = tuple(meta.get("cluster", (1, 1, 1)))
        if cluster != (1, 1, 1):
            raise CudaError(f"kernel '{name}': a cluster launch ({cluster}) is not supported by this launcher yet")
        self._grid = None          # the constant grid, when there is one and it is valid
        if self._grid_of.static is not None:
            try:
                self._grid = self._validate_grid(self._grid_of.static)
            except CudaError:
                self._grid = None  # report it at call time, like a dynamic grid

        self._per_device: dict = {}   # device index -> (CudaFunction, ArgPacker)
        self._lock = threading.Lock()
        self._stream_of = None

    # ---- loading ---------------------------------------------------------------------------
    def _load(self, device: int) -> "_DeviceEntry":
        with self._lock:
            entry = self._per_device.get(device)
            if entry is not None:
                return entry
            from .cuda_driver import CudaModule
            binary = self._binary
            if not binary and self._binary_path:
                with open(self._binary_path, "rb") as f:
                    binary = self._binary = f.read()
            if not binary:
                raise CudaError(f"kernel '{self.name}': the artifact holds no cubin")
            module = CudaModule(binary, device=device)
            fn = module.function(self.kernel_name)
            if self.smem > DEFAULT_SMEM_LIMIT:
                fn.set_max_dynamic_shared(self.smem)
            entry = _DeviceEntry(fn, self.param_kinds)
            if self._stream_of is None:
                self._stream_of = _raw_stream_getter()
            self._per_device[device] = entry
            return entry

    def function(self, device: int = 0):
        """The loaded :class:`CudaFunction` on ``device`` (loading it if needed)."""
        return (self._per_device.get(device) or self._load(device)).fn

    # ---- grid ------------------------------------------------------------------------------
    def _validate_grid(self, grid: tuple) -> tuple:
        gx, gy, gz = grid
        if not (0 < gx <= GRID_LIMITS[0] and 0 < gy <= GRID_LIMITS[1] and 0 < gz <= GRID_LIMITS[2]):
            raise CudaError(
                f"kernel '{self.name}': cannot launch a grid of {grid} blocks (spec {self.grid_spec}); "
                f"every dimension must be at least 1 and at most {GRID_LIMITS} — an empty or huge "
                f"input size?")
        return grid

    def grid_for(self, symbols: dict) -> tuple:
        """The launch grid for these symbol values (validated)."""
        try:
            gx, gy, gz = self._grid_of(symbols)
            grid = (int(gx), int(gy), int(gz))
        except CudaError:
            raise
        except Exception as e:
            raise CudaError(f"kernel '{self.name}': cannot evaluate grid {self.grid_spec} with "
                            f"symbols {dict(symbols)}: {type(e).__name__}: {e}") from None
        return self._validate_grid(grid)

    # ---- the hot path ----------------------------------------------------------------------
    def __call__(self, tensors, symbols, kernel_name=None, stream=None):
        grid = self._grid or self.grid_for(symbols)
        device = tensors[0].get_device() if tensors else _current_device()
        entry = self._per_device.get(device) or self._load(device)
        values = [t.data_ptr() for t in tensors]
        if self._symbol_values is not None:
            values += self._symbol_args(symbols)
        if self._tma:
            values += self._tma_args(tensors)
        if stream is None:
            stream = self._stream_of(device)
        else:
            stream = stream_handle(stream)
        if entry.slots is None:  # argument kinds that need the general packer
            entry.fn.launch_packed(grid, self.block, self.smem, stream, entry.packer, values)
            return
        with entry.lock:
            entry.slots[:] = values
            err = entry.launch(entry.hv, *grid, *self.block, self.smem, ctypes.c_void_p(stream), entry.av, None)
        if err:
            entry.launch_failed(err, grid, self.block, self.smem, stream, values)

    def fast_launch_state(self) -> dict | None:
        """What a generated call (runtime/fastpath.py) needs to launch this kernel itself, or None
        when it must go through ``__call__``: a grid that depends on symbols or is invalid, tensor
        maps to build, symbol arguments, or argument kinds that need the packer."""
        if self._grid is None or self._tma or self.symbols or any(k not in _SLOT_KINDS for k in self.param_kinds):
            return None

        def load(device: int) -> "_DeviceEntry":
            return self._per_device.get(device) or self._load(device)
        if self._stream_of is None:
            self._stream_of = _raw_stream_getter()
        return {"entries": self._per_device, "load": load, "raw_stream": self._stream_of,
                "stream_handle": stream_handle}

    def _tma_args(self, tensors) -> list:
        out = []
        for spec in self._tma:
            t = tensors[spec["param"]]
            key = (spec["param"], t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)
            desc = self._tma_cache.get(key)
            if desc is None:
                from .tma import tma_desc
                try:
                    split = spec.get("split", 0)   # the last dim mapped as [n / split][split] (a long plain row)
                    desc = tma_desc(t.unflatten(-1, (t.shape[-1] // split, split)) if split else t,
                                    tuple(spec["box"]), spec["swizzle"])
                except ValueError as e:
                    how, off = (("added into by TMA reduces", "tc.tma_reduce") if spec.get("reduce")
                                else ("loaded by TMA", "tc.use_tma"))
                    raise CudaError(f"kernel '{self.name}': parameter {self._param_names[spec['param']]} cannot be "
                                    f"{how}: {e} (compile with pass_configs {off}: False)") from None
                if len(self._tma_cache) > 64:
                    self._tma_cache.clear()
                self._tma_cache[key] = desc
            out.append(desc)
        return out

    def _symbol_args(self, symbols) -> tuple:
        try:
            vals = self._symbol_values(symbols)
        except KeyError as e:
            raise CudaError(f"kernel '{self.name}': no value for symbolic dimension {e} "
                            f"(symbols given: {sorted(symbols)})") from None
        for v, kind in zip(vals, self._symbol_kinds):
            lim = _INT_LIMITS[kind]
            if not -lim <= v < lim:
                raise CudaError(f"kernel '{self.name}': symbolic dimension value {v} does not fit "
                                f"the kernel's {kind} parameter (symbols: {dict(symbols)})"
                                + (" -- declare it T.symbolic(name, 'int64') for sizes past 2^31"
                                   if kind == "int32" else ""))
        return vals

    def __repr__(self) -> str:
        return (f"CudaLauncher({self.kernel_name!r}, grid={self.grid_spec}, block={list(self.block)}, "
                f"smem={self.smem}, params={list(self.param_kinds)})")


def stream_handle(stream) -> int:
    """The raw ``cudaStream_t`` of a ``stream=`` argument: an int handle as is, a
    ``torch.cuda.Stream`` (or anything with ``cuda_stream``) by its handle."""
    if type(stream) is int:
        return stream
    handle = getattr(stream, "cuda_stream", stream)
    if not isinstance(handle, int):
        raise TypeError(f"stream= expects a torch.cuda.Stream or an int stream handle, got {type(stream).__name__}")
    return handle


def _current_device() -> int:
    import torch
    return torch.cuda.current_device()


# A size symbol's parameter kinds (launch.ParamKind) and the bound of their signed range.
_INT_LIMITS = {"int32": 2 ** 31, "int64": 2 ** 63}

# Kinds that fit one 8-byte little-endian slot as a Python int (the low 4 bytes for 32-bit ones).
_SLOT_KINDS = {"ptr", "pointer", "handle", "int64", "uint64", "int32", "uint32"}


class _DeviceEntry:
    """The kernel loaded on one device, with its argument storage.

    Fast path (pointers and integers, which is all the code generator emits): each argument
    owns an 8-byte slot of one ctypes array and ``address`` is the ``void*[]`` pointing at the
    slots, so packing is one slice assignment and the launch one ``cuLaunchKernel`` call.
    Other kinds (float scalars) go through :class:`ArgPacker` and ``launch_packed``.
    The lock keeps pack + launch of two threads from interleaving on the shared slots.
    """

    def __init__(self, fn, kinds):
        self.fn, self.handle = fn, fn.handle
        self.lock = threading.Lock()
        self.slots = self.address = self.packer = None
        if all(k in _SLOT_KINDS for k in kinds):
            n = len(kinds)
            self.slots = (ctypes.c_int64 * max(1, n))()
            base, size = ctypes.addressof(self.slots), ctypes.sizeof(ctypes.c_int64)
            self._pointers = (ctypes.c_void_p * max(1, n))(*[base + i * size for i in range(n)])
            self.address = ctypes.addressof(self._pointers) if n else 0
            if n == 0:
                self.slots = self.slots[:0]  # a zero-length slice assignment target
        else:
            self.packer = fn.packer(kinds)
        # the launch: libcuda's cuLaunchKernel through ctypes, arguments as made here
        self.hv = ctypes.c_void_p(int(self.handle))
        self.av = ctypes.c_void_p(self.address or None)
        self.launch = libcuda_launch() or self._bindings_launch
        # what a generated call (runtime/fastpath.py) unpacks in one step
        self.fast = (self.lock.acquire, self.lock.release, self.slots, self.launch, self.hv, self.av)

    def _bindings_launch(self, hv, gx, gy, gz, bx, by, bz, smem, sv, av, extra) -> int:
        """The same launch through cuda-bindings (when libcuda cannot be loaded with ctypes)."""
        (err,) = self.fn.module._drv.cuLaunchKernel(self.handle, gx, gy, gz, bx, by, bz, smem,
                                                     sv.value or 0, av.value or 0, 0)
        return int(err)

    def launch_failed(self, err, grid, block, smem, stream, values) -> None:
        """Slow path after a failed launch: when this thread's current context is not the
        module's (a fresh thread, or another device current), launch again inside the right one;
        otherwise raise the driver's error naming the kernel."""
        from .cuda_driver import _ContextScope, check
        fn = self.fn
        drv, ctx = fn.module._drv, fn.module.context
        if isinstance(err, int):  # from the ctypes launch: the driver's enum names the error
            try:
                err = drv.CUresult(err)
            except ValueError:
                pass
        current = check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if current is not None and int(current) == int(ctx):
            check((err,), f"cuLaunchKernel(grid={tuple(grid)}, block={tuple(block)}, smem={smem})", fn.name)
        if current is None or int(current) == 0:
            check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")  # adopt it, as the runtime API does
        with _ContextScope(drv, ctx), self.lock:
            self.slots[:] = values
            check(drv.cuLaunchKernel(self.handle, *grid, *block, smem, stream, self.address, 0),
                  f"cuLaunchKernel(grid={tuple(grid)}, block={tuple(block)}, smem={smem})", fn.name)


class SequenceLauncher:
    """The kernels of one program with several T.Kernels (transform/split_kernels.py), launched in
    program order on the same stream: stream order makes each kernel see the previous one's writes.
    The arguments were checked once by the caller (the parts share the program's signature)."""

    def __init__(self, launchers):
        self.launchers = list(launchers)

    def __call__(self, tensors, symbols, kernel_name=None, stream=None):
        for launch in self.launchers:
            launch(tensors, symbols, kernel_name, stream)

    def fast_launch_state(self):
        return None  # the generated single-launch call does not apply

"""The cached-launch hot path: a `__call__` made for one kernel signature.

Before: a `JITKernel` with static shapes (no `T.dynamic` symbols), built for the CPU target or a
CUDA kernel whose arguments are all pointers/ints and that builds no TMA descriptor.
After: `specialize(kernel)` returns a subclass of the kernel's class whose `__call__` is made for
exactly this signature (closures over its dtypes, shapes, outputs and launch state; no source text
is generated or compiled), so that a call spends its time on the checks and the launch only:

- every check of the general path stays, as one boolean chain per tensor against the expected
  dtype and shape: exact `torch.Tensor`, dtype, device (CPU; or the first tensor's
  CUDA device for every other tensor), shape, contiguity.  Any miss falls through to
  `JITKernel._call_checked`, which raises the detailed message (or accepts what the chain is too
  strict for: a tensor subclass, a DLPack tensor);
- outputs are allocated with `torch.empty_like(<input>)` when an input has their shape and dtype
  (it was checked contiguous, so the output is too), else `torch.empty(<its sizes>, dtype=...,
  device=...)`;
- CPU: one ctypes call with a pointer array built for the call (thread-safe, no lock);
- CUDA: the loaded function's argument slots are filled (one `struct.pack_into`) under the
  entry's lock (acquire/release bound once, `try/finally`) and launched with one ctypes call into libcuda's `cuLaunchKernel` (no per-call
  argument conversion: the function handle and slot array are `c_void_p`s made at load time; the
  current stream is read per call and its `c_void_p` cached per handle); a failed launch goes to
  the launcher's slow path, which makes the module's context current and retries, or raises.
- First of all, under `torch.compile` tracing the call becomes the kernel's torch custom op
  (`torch_op.compiled_call`), so graphs capture it instead of breaking.

When the compiled launcher (runtime/claunch.py) is available, which is the default, the
`__call__` is only the torch.compile test and one call into it: the same checks,
allocation and launch done in C (`_tclaunch.Launcher`), with the same fall-through to
`_call_checked` on any miss.  The Python body above stays as the fallback (no C++ compiler or
no Python.h on the machine, or ``TILECRAFT_LAUNCHER=python``); `type(kernel).launcher` says
which one a kernel got ("c" or "python").

Kernels that do not qualify keep the general `JITKernel.__call__`.
"""
from __future__ import annotations

import ctypes
import struct

from .args import _load_torch

__all__ = ["specialize"]


_MISS = object()   # a branch's answer when an argument is not what the signature says


def _branch(kernel, given_outputs: bool, cuda: bool, device_attr: str, ns: dict):
    """The fast path for one argument count: `branch(self, args, stream)` -> the result, or `_MISS`
    when any argument is not the exact tensor the signature expects (the checked path then decides)."""
    params = kernel.params
    n = len(params)
    taken = [i for i, p in enumerate(params) if given_outputs or not p.is_output]
    checks = tuple((i, params[i].dtype, tuple(params[i].shape)) for i in taken)
    allocs = []   # (param, the input it is shaped like or None, dtype, sizes)
    if not given_outputs:
        for i, p in enumerate(params):
            if p.is_output:
                # like an input of the same shape and dtype (checked contiguous): empty_like is
                # the cheapest allocation and needs no device lookup
                twin = next((j for j in taken if tuple(params[j].shape) == tuple(p.shape)
                             and params[j].dtype == p.dtype), None)
                sizes = tuple(int(s) for s in p.shape)
                allocs.append((i, twin, p.dtype, sizes or ((),)))   # a 0-d output: empty((), ...)
    outs = tuple(kernel.out_idx)
    Tensor, empty, empty_like = ns["Tensor"], ns["empty"], ns["empty_like"]

    def tensors(args, device):
        """Every parameter's tensor in order: the arguments, then the outputs allocated."""
        vals = [None] * n
        for (i, _, _), a in zip(checks, args):
            vals[i] = a
        for i, twin, dtype, sizes in allocs:
            vals[i] = empty_like(vals[twin]) if twin is not None else empty(*sizes, dtype=dtype, device=device())
        return vals

    def result(vals):
        if not outs:
            return None
        return vals[outs[0]] if len(outs) == 1 else tuple(vals[i] for i in outs)

    if not cuda:
        cfn, PTRS, DIMS, CPU = ns["cfn"], ns["PTRS"], ns["DIMS"], ns["CPU"]

        def branch(self, args, stream):
            for (_, D, S), a in zip(checks, args):
                if not (type(a) is Tensor and a.dtype is D and getattr(a, device_attr) and a.shape == S
                        and a.is_contiguous()):
                    return _MISS
            vals = tensors(args, lambda: CPU)
            rc = cfn(PTRS(*[v.data_ptr() for v in vals]), DIMS)
            if rc:
                self._cpu_failed(rc)
            return result(vals)
        return branch

    entries, load, raw_stream, stream_handle = ns["entries"], ns["load"], ns["raw_stream"], ns["stream_handle"]
    streams, stream_cvp, pack, devs, cuda_device = (ns["streams"], ns["stream_cvp"], ns["pack"], ns["devs"],
                                                    ns["cuda_device"])
    GX, GY, GZ, GRID, BLOCK, BX, BY, BZ, SMEM = (ns[k] for k in ("GX", "GY", "GZ", "GRID", "BLOCK", "BX", "BY",
                                                               "BZ", "SMEM"))
    (_, D0, S0), rest = checks[0], checks[1:]

    def branch(self, args, stream):
        first = args[0]
        if not (type(first) is Tensor and first.dtype is D0 and getattr(first, device_attr) and first.shape == S0
                and first.is_contiguous()):
            return _MISS
        dev = first.get_device()   # every other tensor on the first one's CUDA device
        for (_, D, S), a in zip(rest, args[1:]):
            if not (type(a) is Tensor and a.dtype is D and a.get_device() == dev and a.shape == S
                    and a.is_contiguous()):
                return _MISS
        vals = tensors(args, lambda: devs.get(dev) or cuda_device(dev))
        ptrs = [v.data_ptr() for v in vals]
        e = entries.get(dev) or load(dev)
        acquire, release, slots, launch, hv, av = e.fast
        s = raw_stream(dev) if stream is None else stream_handle(stream)
        sv = streams.get(s)
        if sv is None:
            sv = stream_cvp(s)
        acquire()
        try:
            pack(slots, 0, *ptrs)
            err = launch(hv, GX, GY, GZ, BX, BY, BZ, SMEM, sv, av, None)
        finally:
            release()
        if err:
            e.launch_failed(err, GRID, BLOCK, SMEM, s, ptrs)
        return result(vals)
    return branch


def python_calls(kernel, cuda: bool, ns: dict, device_attr: str | None = None) -> tuple:
    """(`__call__`, `_eager_call`) in Python: the torch.compile test, then the fast branch for the
    argument count (inputs only, or every parameter), else the checked path; `_eager_call` is the
    same without the test (what the custom op runs).  `ns` holds what the branches use (the
    signature's launcher state, torch's Tensor/empty/empty_like); `device_attr` (default `is_cuda` /
    `is_cpu`) is the tensor attribute of the device test (benchmarks/launch_profile.py runs the CUDA
    branch on CPU tensors with `is_cpu`)."""
    device_attr = device_attr or ("is_cuda" if cuda else "is_cpu")
    n_in = sum(1 for p in kernel.params if not p.is_output)
    branches = {}
    if n_in:
        branches[n_in] = _branch(kernel, False, cuda, device_attr, ns)
    if kernel.out_idx:
        branches.setdefault(len(kernel.params), _branch(kernel, True, cuda, device_attr, ns))
    is_compiling, compiled_call = ns["is_compiling"], ns["compiled_call"]

    def run(self, args, stream):
        branch = branches.get(len(args))
        if branch is not None:
            r = branch(self, args, stream)
            if r is not _MISS:
                return r
        return self._call_checked(args, stream)

    def __call__(self, *args, stream=None):
        if is_compiling():
            return compiled_call(self, args, stream)
        return run(self, args, stream)

    def _eager_call(self, args, stream=None):
        return run(self, tuple(args), stream)
    return __call__, _eager_call


def c_calls(ns: dict) -> tuple:
    """(`__call__`, `_eager_call`) when the compiled launcher does the work: `ns["fast"]` is the
    kernel's `_tclaunch.Launcher`, which returns `ns["MISS"]` where the checked path must decide."""
    fast, MISS, is_compiling, compiled_call = ns["fast"], ns["MISS"], ns["is_compiling"], ns["compiled_call"]

    def __call__(self, *args, stream=None):
        if is_compiling():
            return compiled_call(self, args, stream)
        r = fast(args, stream)
        if r is MISS:
            return self._call_checked(args, stream)
        return r

    def _eager_call(self, args, stream=None):
        args = tuple(args)
        r = fast(args, stream)
        if r is MISS:
            return self._call_checked(args, stream)
        return r
    return __call__, _eager_call


def _cuda_namespace(kernel) -> dict | None:
    launcher = kernel._launch
    fast = launcher.fast_launch_state()
    if fast is None:
        return None
    torch = _load_torch()
    devs: dict = {}

    def cuda_device(index: int):
        d = devs[index] = torch.device("cuda", index)
        return d

    streams: dict = {}

    def stream_cvp(handle: int):
        if len(streams) > 256:
            streams.clear()
        v = streams[handle] = ctypes.c_void_p(handle)
        return v

    grid, block = launcher._grid, launcher.block
    return dict(fast, pack=struct.Struct("<%dQ" % len(kernel.params)).pack_into, devs=devs,
                cuda_device=cuda_device, streams=streams, stream_cvp=stream_cvp,
                GX=grid[0], GY=grid[1], GZ=grid[2], GRID=grid, BLOCK=block,
                BX=block[0], BY=block[1], BZ=block[2], SMEM=launcher.smem)


def specialize(kernel, launcher: str = "auto", namespace: dict | None = None):
    """The class with the call made for `kernel`'s signature, or None when it does not qualify.
    `launcher`: "auto" (the compiled launcher when available, else the Python call), "c" (None
    without it) or "python".  `namespace` replaces entries of what the call is built from (tests
    put stand-ins for torch's tensor type, allocation or the current stream there); the class's
    `call_namespace` is that mapping as used."""
    if not kernel.params or any(not p.static for p in kernel.params):
        return None
    if all(p.is_output for p in kernel.params):
        return None
    cuda = kernel.target.kind == "cuda"
    fast = None
    if cuda:
        ns = _cuda_namespace(kernel)
        if ns is None:
            return None
        if launcher != "python":
            from .claunch import cuda_launcher
            fast = cuda_launcher(kernel, ns)
    else:
        la = kernel._launch
        ns = {"cfn": la.fn, "PTRS": ctypes.c_void_p * len(kernel.params), "DIMS": la.dims,
              "CPU": kernel._cpu_device}
        if launcher != "python":
            from .claunch import cpu_launcher
            fast = cpu_launcher(kernel)
    if fast is None and launcher == "c":
        return None
    torch = _load_torch()
    from .torch_op import compiled_call
    ns.update(Tensor=torch.Tensor, empty=torch.empty, empty_like=torch.empty_like,
              compiled_call=compiled_call, is_compiling=_is_compiling_fn(torch))
    ns.update(namespace or {})
    if fast is not None:
        from .claunch import MISS, pending
        pending(kernel)  # moved onto the torch-aware launcher when its background build is done
        ns.update(fast=fast, MISS=MISS)
        call, eager = c_calls(ns)
    else:
        call, eager = python_calls(kernel, cuda, ns)
    call.__doc__ = type(kernel).__call__.__doc__
    base = type(kernel)
    while "launcher" in base.__dict__:  # re-specializing: derive from the general class
        base = base.__base__
    return type(base.__name__, (base,), {"__call__": call, "_eager_call": eager,
                                         "__module__": base.__module__, "__qualname__": base.__qualname__,
                                         "call_namespace": ns, "launcher": "c" if fast is not None else "python"})


def _is_compiling_fn(torch):
    """`torch.compiler.is_compiling` (torch >= 2.3), else a function that is always False (no
    custom-op dispatch on that torch: a compiled graph breaks at the kernel instead)."""
    compiler = getattr(torch, "compiler", None)
    fn = getattr(compiler, "is_compiling", None)
    return fn if fn is not None else (lambda: False)

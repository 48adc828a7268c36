"""The cached-launch hot path: a `__call__` generated for one kernel signature.

Before: a `JITKernel` with static shapes (no `T.dynamic` symbols), built for the CPU target or a
CUDA kernel whose arguments are all pointers/ints and that builds no TMA descriptor.
After: `specialize(kernel)` returns a subclass of the kernel's class whose `__call__` is Python
source written for exactly this signature and compiled once, so that a call spends its time on
the checks and the launch only:

- every check of the general path stays, as one boolean chain per tensor with the expected
  dtype and shape as constants: exact `torch.Tensor`, dtype, device (CPU; or the first tensor's
  CUDA device for every other tensor), shape, contiguity.  Any miss falls through to
  `JITKernel._call_checked`, which raises the detailed message (or accepts what the chain is too
  strict for: a tensor subclass, a DLPack tensor);
- outputs are allocated with `torch.empty_like(<input>)` when an input has their shape and dtype
  (it was checked contiguous, so the output is too), else `torch.empty(<literal sizes>, dtype=...,
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
generated `__call__` is only the torch.compile test and one call into it: the same checks,
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


def _tensor_test(var: str, idx: int, shape: tuple, device_test: str) -> str:
    return (f"type({var}) is Tensor and {var}.dtype is D{idx} and {device_test} and "
            f"{var}.shape == S{idx} and {var}.is_contiguous()")


def _alloc(shape: tuple, idx: int, device: str) -> str:
    dims = ", ".join(str(int(s)) for s in shape) if shape else "()"
    return f"empty({dims}, dtype=D{idx}, device={device})"


def _branch(kernel, given_outputs: bool, cuda: bool, device_attr: str) -> list:
    """Source lines (indented for the body of `if n == ...:`) of one fast branch."""
    params = kernel.params
    names = [f"p{i}" for i in range(len(params))]
    taken = [i for i, p in enumerate(params) if given_outputs or not p.is_output]
    lines = [f"    {', '.join(names[i] for i in taken)}, = args"]
    first = taken[0]
    if cuda:
        lines.append(f"    if {_tensor_test(names[first], first, params[first].shape, names[first] + '.' + device_attr)}:")
        lines.append(f"        dev = {names[first]}.get_device()")
        rest = taken[1:]
        ind = "        "
        if rest:
            tests = " and ".join(_tensor_test(names[i], i, params[i].shape, f"{names[i]}.get_device() == dev")
                                 for i in rest)
            lines.append(f"        if {tests}:")
            ind = "            "
    else:
        tests = " and ".join(_tensor_test(names[i], i, params[i].shape, f"{names[i]}.{device_attr}") for i in taken)
        lines.append(f"    if {tests}:")
        ind = "        "
    if not given_outputs:
        device = "devs.get(dev) or cuda_device(dev)" if cuda else "CPU"
        for i, p in enumerate(params):
            if p.is_output:
                # like an input of the same shape and dtype (checked contiguous): empty_like is
                # the cheapest allocation and needs no device lookup
                twin = next((j for j in taken if tuple(params[j].shape) == tuple(p.shape)
                             and params[j].dtype == p.dtype), None)
                alloc = f"empty_like({names[twin]})" if twin is not None else _alloc(p.shape, i, device)
                lines.append(f"{ind}{names[i]} = {alloc}")
    ptrs = ", ".join(f"{n}.data_ptr()" for n in names)
    if cuda:
        lines += [f"{ind}e = entries.get(dev) or load(dev)",
                  f"{ind}acquire, release, slots, launch, hv, av = e.fast",
                  f"{ind}s = raw_stream(dev) if stream is None else stream_handle(stream)",
                  f"{ind}sv = streams.get(s)",
                  f"{ind}if sv is None:",
                  f"{ind}    sv = stream_cvp(s)",
                  f"{ind}acquire()",
                  f"{ind}try:",
                  f"{ind}    pack(slots, 0, {ptrs})",
                  f"{ind}    err = launch(hv, GX, GY, GZ, BX, BY, BZ, SMEM, sv, av, None)",
                  f"{ind}finally:",
                  f"{ind}    release()",
                  f"{ind}if err:",
                  f"{ind}    e.launch_failed(err, GRID, BLOCK, SMEM, s, [{ptrs}])"]
    else:
        lines += [f"{ind}rc = cfn(PTRS({ptrs}), DIMS)",
                  f"{ind}if rc:",
                  f"{ind}    self._cpu_failed(rc)"]
    outs = [names[i] for i in kernel.out_idx]
    ret = "None" if not outs else outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ",)"
    lines.append(f"{ind}return {ret}")
    return lines


def _source(kernel, cuda: bool, device_attr: str | None = None) -> str:
    """`__call__` (the torch.compile test, then the fast branches) and `_eager_call` (the same
    branches without the test: what the custom op runs).  `device_attr` (default `is_cuda` /
    `is_cpu`) is the tensor attribute of the device test (benchmarks/launch_profile.py runs the
    CUDA branch on CPU tensors with `is_cpu`)."""
    device_attr = device_attr or ("is_cuda" if cuda else "is_cpu")
    n_in = sum(1 for p in kernel.params if not p.is_output)
    n_all = len(kernel.params)
    branches = [(n_in, False)] if n_in else []
    if kernel.out_idx:
        branches.append((n_all, True))
    fast = ["    n = len(args)"]
    for k, (count, given) in enumerate(branches):
        fast.append(f"    {'if' if k == 0 else 'elif'} n == {count}:")
        fast += ["    " + ln for ln in _branch(kernel, given, cuda, device_attr)]
    fast.append("    return self._call_checked(args, stream)")
    call = ["def __call__(self, *args, stream=None):",
            "    if is_compiling():",
            "        return compiled_call(self, args, stream)"] + fast
    eager = ["def _eager_call(self, args, stream=None):", "    args = tuple(args)"] + fast
    return "\n".join(call + [""] + eager) + "\n"


# The call when the compiled launcher does the work: `fast` is the kernel's `_tclaunch.Launcher`.
C_SOURCE = """\
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
"""


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


def specialize(kernel, launcher: str = "auto"):
    """The class with the generated `__call__` for `kernel`, or None when it does not qualify.
    `launcher`: "auto" (the compiled launcher when available, else the Python call), "c" (None
    without it) or "python"."""
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
    for i, p in enumerate(kernel.params):
        ns[f"D{i}"] = p.dtype
        ns[f"S{i}"] = tuple(p.shape)
    if fast is not None:
        from .claunch import MISS, pending
        pending(kernel)  # moved onto the torch-aware launcher when its background build is done
        ns.update(fast=fast, MISS=MISS)
        source = C_SOURCE
    else:
        source = _source(kernel, cuda)
    code = compile(source, f"<tilecraft call of {kernel.name}>", "exec")
    exec(code, ns)  # noqa: S102 - our own text, built above from the signature
    fn = ns["__call__"]
    fn.__doc__ = type(kernel).__call__.__doc__
    base = type(kernel)
    while "call_source" in base.__dict__:  # re-specializing: derive from the general class
        base = base.__base__
    return type(base.__name__, (base,), {"__call__": fn, "_eager_call": ns["_eager_call"],
                                         "__module__": base.__module__, "__qualname__": base.__qualname__,
                                         "call_source": source, "launcher": "c" if fast is not None else "python"})


def _is_compiling_fn(torch):
    """`torch.compiler.is_compiling` (torch >= 2.3), else a function that is always False (no
    custom-op dispatch on that torch: a compiled graph breaks at the kernel instead)."""
    compiler = getattr(torch, "compiler", None)
    fn = getattr(compiler, "is_compiling", None)
    return fn if fn is not None else (lambda: False)

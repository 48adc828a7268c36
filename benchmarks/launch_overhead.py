"""Where the host time of one cached kernel call goes (µs per call, best of 5 rounds).

    python3 benchmarks/launch_overhead.py

Compares the pieces of `JITKernel.__call__` for a tiny vector add (the users' call: the compiled
launcher of runtime/claunch.py; the generated Python call of runtime/fastpath.py it replaced; the
general checked path, argument checks, output allocation, the launcher's Python, the driver call
through cuda.bindings and through ctypes with and without argtypes) with `torch.add`, so a change
to the hot path can be judged against its parts.  Without a GPU: benchmarks/launch_profile.py.
"""
from __future__ import annotations

import ctypes
import os
import sys


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from tilecraft.profiler.bench import host_time_us  # noqa: E402


host_us = host_time_us  # one definition, in tilecraft.profiler


def main():
    import tilecraft.kernels as K
    from tilecraft.runtime import claunch
    from tilecraft.runtime.fastpath import specialize
    claunch.wait()  # the torch-aware launcher (built once per machine)
    n = 1024
    k = K.vector_add(n)
    print(f"users' call: {type(k).launcher} launcher"
          + (f", torch-aware build {claunch.module().native_build()}" if type(k).launcher == "c" else ""))
    kp = type(k).__new__(type(k))
    kp.__dict__.update(k.__dict__)
    os.environ["TILECRAFT_LAUNCHER"] = "python"
    kp.__class__ = specialize(kp)
    del os.environ["TILECRAFT_LAUNCHER"]
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    la = k._launch
    entry = la._per_device.get(0) or la._load(0)
    fn = entry.fn
    packer = fn.packer(la.param_kinds)
    stream = torch.cuda.current_stream().cuda_stream
    grid, block = la.grid_for({}), la.block
    values = [a.data_ptr(), b.data_ptr(), c.data_ptr()]
    drv = fn.module._drv
    packer.pack(values)
    addr = packer.address
    entry.slots[:] = values  # the entry's own argument slots, for its ctypes launch below

    libcuda = ctypes.CDLL("libcuda.so.1")  # its own function objects: argtypes here do not touch ours
    launch = libcuda.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    launch.restype = ctypes.c_int
    h = int(fn.handle)
    sv = ctypes.c_void_p(stream)
    gx, gy, gz = grid
    bx, by, bz = block

    Tensor = torch.Tensor
    shapes = [tuple(p.shape) for p in k.params]
    dtypes = [p.dtype for p in k.params]

    def fast_check():  # a candidate fast path for ArgChecker: one boolean per tensor, details on failure
        for t, shp, dt in zip((a, b, c), shapes, dtypes):
            if not (type(t) is Tensor and t.dtype is dt and t.is_cuda and t.shape == shp and t.is_contiguous()):
                raise ValueError

    rows = [
        ("torch.add(a, b)", lambda: torch.add(a, b)),
        ("torch.empty(n)", lambda: torch.empty(n, device=a.device)),
        ("torch.empty_like(a)", lambda: torch.empty_like(a)),
        ("kernel(a, b) (users' call, output allocated)", lambda: k(a, b)),
        ("kernel(a, b, c) (users' call, output given)", lambda: k(a, b, c)),
        ("kernel(a, b) (generated Python call, output allocated)", lambda: kp(a, b)),
        ("kernel(a, b, c) (generated Python call, output given)", lambda: kp(a, b, c)),
        ("kernel._call_checked((a, b)) (general path)", lambda: k._call_checked((a, b), None)),
        ("ctypes libcuda cuLaunchKernel, no argtypes (what the generated call uses)",
         lambda: entry.launch(entry.hv, gx, gy, gz, bx, by, bz, 0, sv, entry.av, None)),
        ("launcher([a, b, c], {}, name)", lambda: la([a, b, c], {}, "k")),
        ("ArgChecker.check x3", lambda: [k._checker.check(p, t, {}) for p, t in zip(k.params, (a, b, c))]),
        ("fn.launch_packed(...)", lambda: fn.launch_packed(grid, block, 0, stream, packer, values)),
        ("cuda.bindings cuLaunchKernel (packed)", lambda: drv.cuLaunchKernel(fn.handle, gx, gy, gz, bx, by, bz,
                                                                              0, stream, addr, 0)),
        ("ctypes libcuda cuLaunchKernel (packed)", lambda: launch(h, gx, gy, gz, bx, by, bz, 0, stream, addr, None)),
        ("fast check x3 (candidate for ArgChecker)", fast_check),
        ("a.device.type", lambda: a.device.type),
        ("a.is_cuda", lambda: a.is_cuda),
        ("a.is_contiguous()", lambda: a.is_contiguous()),
        ("a.shape == (n,)", lambda: a.shape == (n,)),
        ("torch._C._cuda_getCurrentRawStream(0)", lambda: torch._C._cuda_getCurrentRawStream(0)),
        ("3x data_ptr()", lambda: (a.data_ptr(), b.data_ptr(), c.data_ptr())),
    ]
    assert launch(h, gx, gy, gz, bx, by, bz, 0, stream, addr, None) == 0
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    results = {name: [] for name, _ in rows}
    for _ in range(2):  # two passes: the spread between them is the noise
        for name, f in rows:
            results[name].append(host_us(f))
    for name, (t1, t2) in results.items():
        print(f"{t1:8.2f} {t2:8.2f} us  {name}", flush=True)


if __name__ == "__main__":
    main()

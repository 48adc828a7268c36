"""Where the host time of a cached CUDA launch goes, measured on the CPU with the driver stubbed.

    python benchmarks/launch_profile.py [--rounds 7]

Needs no GPU.  A 1024-element fp32 vector add is compiled for sm_90a (NVRTC; nothing is
loaded), and its cached call is run end to end with CPU tensors standing in for CUDA tensors
(the device test reads `is_cpu` instead of `is_cuda`; `get_device()` is still called, as on
CUDA), torch's current-stream lookup replaced by a C-level function returning 0, and
`cuLaunchKernel` replaced by a no-op C function with its signature (`tc_stub_launch` in
runtime/claunch.cpp).  Everything else is the code users get:

- before: the generated Python call (runtime/fastpath.py: boolean check chain, empty_like,
  lock + struct.pack_into, ctypes into the driver);
- after: the compiled launcher (runtime/claunch.cpp, the default when it builds).

Per-stage rows time each piece of the Python call alone (ns per call, best round); the totals
rows time the two whole calls; "rest" is a total minus the output allocation and the stubbed
driver call, i.e. what our own code costs.  On the GPU the driver call and the CUDA caching
allocator are added to both totals; torch.add pays for its own allocation and launch the same
way (benchmarks/bench.py --only launch prints the real numbers side by side).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import struct
import sys
import threading
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import tilecraft as tilelang  # noqa: E402
from tilecraft.kernels import elementwise  # noqa: E402
from tilecraft.runtime import claunch, fastpath  # noqa: E402

N = 1024


def ns_per_call(fn, n: int = 20000, rounds: int = 7) -> float:
    """Best-of-rounds ns per call (the minimum: other processes only ever add time)."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e9


def stub_driver():
    """The no-op cuLaunchKernel: a ctypes function (as libcuda_launch() gives the Python call)
    and its address (for the compiled launcher)."""
    mod = claunch.module()
    if mod is None:
        raise SystemExit(f"the compiled launcher does not build here: {claunch.error()}")
    lib = ctypes.CDLL(mod.__file__)
    fn = lib.tc_stub_launch
    fn.restype = ctypes.c_int
    return fn, claunch.stub_launch_address()


def stand_in_entry(nparams: int, launch):
    """What `_DeviceEntry` gives the generated call, with its real slot layout."""
    slots = (ctypes.c_int64 * nparams)()
    base = ctypes.addressof(slots)
    pointers = (ctypes.c_void_p * nparams)(*[base + 8 * i for i in range(nparams)])
    lock = threading.Lock()
    hv, av = ctypes.c_void_p(0x1000), ctypes.c_void_p(ctypes.addressof(pointers))
    return SimpleNamespace(handle=0x1000, slots=slots, pointers=pointers, lock=lock, hv=hv, av=av,
                           launch=launch, fast=(lock.acquire, lock.release, slots, launch, hv, av),
                           launch_failed=None)


def build_calls(kernel):
    """(before, after): the kernel's Python call and compiled call, on CPU stand-ins."""
    claunch.wait()  # a first run builds the torch-aware variant (~10 s, once)
    launch, address = stub_driver()
    entry = stand_in_entry(len(kernel.params), launch)
    raw_stream = (0).__mul__          # C-level, like torch._C._cuda_getCurrentRawStream
    ns = fastpath._cuda_namespace(kernel)
    ns["entries"][-1] = entry         # CPU tensors: get_device() is -1
    ns.update(raw_stream=raw_stream, Tensor=torch.Tensor, empty=torch.empty, empty_like=torch.empty_like,
              compiled_call=None, is_compiling=fastpath._is_compiling_fn(torch))
    before, _ = fastpath.python_calls(kernel, True, ns, device_attr="is_cpu")

    fast = dict(entries={-1: entry}, load=lambda dev: entry, raw_stream=raw_stream,
                stream_handle=ns["stream_handle"])
    after = {}
    for variant in ("c", "capi"):
        launcher = claunch.cuda_launcher(kernel, fast, launch_address=address, device_attr="is_cpu", variant=variant)
        if launcher is None:
            continue
        call, _ = fastpath.c_calls(dict(fast=launcher, MISS=claunch.MISS, compiled_call=None,
                                        is_compiling=ns["is_compiling"]))
        after["torch-aware build" if claunch.module(variant).native_build() else "Python.h-only build"] = call
    return before, after, ns, entry


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    R = args.rounds
    kernel = tilelang.compile(elementwise.vector_add.get_tir(N), out_idx=[-1],
                              target={"kind": "cuda", "arch": "sm_90a"})
    before, afters, ns, entry = build_calls(kernel)
    a, b = torch.randn(N), torch.randn(N)
    k = kernel
    c = before(k, a, b)
    assert c.shape == (N,) and struct.unpack("<3q", bytes(entry.slots)) == (a.data_ptr(), b.data_ptr(), c.data_ptr())
    for after in afters.values():
        assert after(k, a, b).shape == (N,)
        try:  # a miss reaches the checked path, which raises (on a CPU tensor: the device error)
            after(k, a.double(), b)
            raise AssertionError("a float64 tensor was launched")
        except TypeError:
            pass

    D0, S0, is_compiling = ns["D0"], ns["S0"], ns["is_compiling"]
    Tensor, empty_like, raw_stream, streams = torch.Tensor, torch.empty_like, ns["raw_stream"], ns["streams"]
    e = entry
    acquire, release, slots, launch, hv, av = e.fast
    pack = ns["pack"]
    sv = ctypes.c_void_p(0)
    GX, GY, GZ = kernel._launch._grid
    BX, BY, BZ = kernel._launch.block

    def frame(self, *args, stream=None):
        if is_compiling():
            return None
        return None

    def checks():
        if type(a) is Tensor and a.dtype is D0 and a.is_cpu and a.shape == S0 and a.is_contiguous():
            dev = a.get_device()
            if type(b) is Tensor and b.dtype is D0 and b.get_device() == dev and b.shape == S0 and b.is_contiguous():
                return dev

    def lookup():
        ee = ns["entries"].get(-1)
        x = ee.fast
        s = raw_stream(-1)
        return streams.get(s), x

    def packed():
        acquire()
        try:
            pack(slots, 0, a.data_ptr(), b.data_ptr(), c.data_ptr())
        finally:
            release()

    stages = [
        ("call frame + is_compiling()", lambda: frame(k, a, b)),
        ("argument checks, 2 tensors (Python chain)", checks),
        ("output: torch.empty_like(a)", lambda: empty_like(a)),
        ("device entry + current-stream lookup (stub getter)", lookup),
        ("3x data_ptr() + lock + struct.pack_into", packed),
        ("driver call through ctypes (stub cuLaunchKernel)",
         lambda: launch(hv, GX, GY, GZ, BX, BY, BZ, 0, sv, av, None)),
    ]
    print(f"host ns per call, best of {R} rounds, CPU tensors as stand-ins, driver stubbed "
          f"(torch {torch.__version__}, Python {sys.version.split()[0]})")
    print("-- the Python call (before), stage by stage")
    total_stages = 0.0
    for name, fn in stages:
        t = ns_per_call(fn, rounds=R)
        total_stages += t
        print(f"{t:9.0f}  {name}")
    print(f"{total_stages:9.0f}  sum of the stages")
    alloc = ns_per_call(lambda: empty_like(a), rounds=R)
    drv = ns_per_call(lambda: launch(hv, GX, GY, GZ, BX, BY, BZ, 0, sv, av, None), rounds=R)
    print("-- whole calls, alternated (before / after), output allocated")
    rows = {"before: generated Python call": lambda: before(k, a, b)}
    for name, after in afters.items():
        rows[f"after: compiled launcher, {name}"] = lambda after=after: after(k, a, b)
    rows["before, output given"] = lambda: before(k, a, b, c)
    for name, after in afters.items():
        rows[f"after, output given, {name}"] = lambda after=after: after(k, a, b, c)
    best = {name: float("inf") for name in rows}
    for _ in range(3):
        for name, fn in rows.items():
            best[name] = min(best[name], ns_per_call(fn, rounds=R))
    for name, t in best.items():
        print(f"{t:9.0f}  {name}")
    b0 = best["before: generated Python call"]
    print(f"our own code = total - empty_like ({alloc:.0f} ns) - the driver call (ctypes stub {drv:.0f} ns; "
          f"from C ~0): before {b0 - alloc - drv:.0f} ns")
    for name in afters:
        a0 = best[f"after: compiled launcher, {name}"]
        print(f"after, {name}: saved {b0 - a0:.0f} ns per call ({b0 / a0:.2f}x less host time with the "
              f"driver stubbed)")
    add = ns_per_call(lambda: torch.add(a, b), rounds=R)
    print(f"for scale: torch.add(a, b) on these CPU tensors {add:.0f} ns (computes on the CPU: not the GPU figure)")


if __name__ == "__main__":
    main()

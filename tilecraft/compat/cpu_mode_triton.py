"""CPU mode's part for Triton, which TileLang's examples use for their reference kernels and timings.

Only ever called by ``cpu_mode.install`` / ``uninstall`` (the list of what CPU mode patches is in
cpu_mode.py's docstring).  Triton has no CPU backend, but its interpreter (``TRITON_INTERPRET=1``)
runs a ``@triton.jit`` kernel on CPU tensors; what a program asks Triton's GPU driver for directly
gets a stand-in's answer.  Nothing here imports triton: the patches apply when the program imports
it (a post-import hook on ``sys.meta_path``), or at once if it already has.  The interpreter's
bfloat16 arithmetic, math functions and ``tl.dot`` compute on float32 values rounded back to bfloat16,
as a GPU does (the interpreter alone computes on the bit patterns; ``_patch_interpreter``), and a
launch of many programs reports its progress on stderr every minute (the interpreter runs them one
at a time: a 524,288-program launch takes many minutes, which must not look like a hang).
"""
from __future__ import annotations

import os
import sys
import time
from types import SimpleNamespace


def _do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean", **_):
    """``triton.testing.do_bench`` in CPU mode: milliseconds per call on the host clock."""
    from ..profiler.bench import do_bench
    for x in grad_to_none or ():
        x.grad = None
    return do_bench(fn, warmup=warmup, rep=rep, quantiles=quantiles, return_mode=return_mode,
                    device="cpu", flush_l2=False)


class _Driver:
    """``triton.runtime.driver.active`` in CPU mode: one device of the reported architecture."""

    def __init__(self, arch: str):
        from .cpu_mode import device_properties
        self.arch = arch
        self._props = device_properties(arch)
        self.utils = SimpleNamespace(get_device_properties=self._device_properties)

    def _device_properties(self, device=0) -> dict:
        p = self._props
        return {"max_shared_mem": p.shared_memory_per_block_optin, "multiprocessor_count": p.multi_processor_count,
                "sm_clock_rate": 1_980_000, "mem_clock_rate": 2_619_000, "mem_bus_width": 5120,
                "max_num_regs": p.regs_per_block, "warpSize": p.warp_size}

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget
        sm = int("".join(c for c in self.arch if c.isdigit()))
        return GPUTarget("cuda", sm, 32)

    def is_active(self) -> bool:
        return True

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device) -> None:
        return None

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_active_torch_device(self):
        import torch
        return torch.device("cpu")

    def get_device_interface(self):
        import torch
        return torch.cuda

    def get_benchmarker(self):
        return _do_bench

    def get_empty_cache_for_benchmark(self):
        import torch
        return torch.empty(1 << 20, dtype=torch.int32)

    def clear_cache(self, cache) -> None:
        cache.zero_()


def _patch_testing(module, state) -> None:
    if getattr(module, "do_bench", None) is not _do_bench:
        state.setdefault("do_bench", getattr(module, "do_bench", None))
        module.do_bench = _do_bench


def _patch_driver(module, state) -> None:
    config = getattr(module, "driver", None)
    if config is not None and hasattr(config, "set_active") and "driver" not in state:
        state["driver"] = config
        config.set_active(_Driver(state["arch"]))


# Triton's interpreter keeps bfloat16 values as their uint16 bit patterns and runs numpy on them:
# arithmetic, comparisons, math functions and tl.dot on bfloat16 compute on the bits (tl.dot of two
# bfloat16 tiles gives values around 1e9; Triton's maintainers: not supported yet).  A GPU computes
# these in float32 and rounds the result to bfloat16 (round to nearest even); CPU mode makes the
# interpreter do the same.  Reductions (tl.sum / tl.max over bfloat16) are left as they are.
# A launch of many programs in the interpreter can run for minutes: it says how far it is.
PROGRESS_MIN_PROGRAMS = 4096
PROGRESS_SECONDS = 60.0

_BF16_BINARY = frozenset({"add", "subtract", "multiply", "divide", "fmod", "minimum", "maximum", "fmin", "fmax",
                          "less", "less_equal", "greater", "greater_equal", "equal", "not_equal"})
_BF16_UNARY = frozenset({"negative", "exp", "exp2", "log", "log2", "sqrt", "sin", "cos", "floor", "ceil"})


def _bf16_to_f32(bits):
    import numpy as np
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(values):
    import numpy as np
    import torch
    t = torch.from_numpy(np.array(values, dtype=np.float32))
    return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def _patch_interpreter(module, state) -> None:
    builder = getattr(module, "InterpreterBuilder", None)
    handle, tl = getattr(module, "TensorHandle", None), getattr(module, "tl", None)
    if builder is None or handle is None or tl is None or "interpreter" in state:
        return
    orig = {name: builder.__dict__[name] for name in ("binary_op", "unary_op", "create_fma", "create_dot",
                                                      "set_grid_dim", "set_grid_idx")}
    state["interpreter"] = (builder, orig)

    def bf16(h) -> bool:
        return h.dtype.scalar == tl.bfloat16

    def binary_op(self, lhs, rhs, op):
        if bf16(lhs) and bf16(rhs) and getattr(op, "__name__", "") in _BF16_BINARY:
            out = op(_bf16_to_f32(lhs.data), _bf16_to_f32(rhs.data))
            return handle(out if out.dtype == bool else _f32_to_bf16(out), tl.bfloat16)
        return orig["binary_op"](self, lhs, rhs, op)

    def unary_op(self, arg, op):
        if bf16(arg) and getattr(op, "__name__", "") in _BF16_UNARY:
            return handle(_f32_to_bf16(op(_bf16_to_f32(arg.data))), tl.bfloat16)
        return orig["unary_op"](self, arg, op)

    def create_fma(self, x, y, z):
        if bf16(x) or bf16(y) or bf16(z):
            import numpy as np
            vals = [_bf16_to_f32(h.data) if bf16(h) else h.data for h in (x, y, z)]
            out = np.add(np.multiply(vals[0], vals[1], dtype=np.float64), vals[2], dtype=np.float64)
            if bf16(z):
                return handle(_f32_to_bf16(out), tl.bfloat16)
            return handle(out.astype(z.data.dtype), z.dtype.scalar)
        return orig["create_fma"](self, x, y, z)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        a, b = ((handle(_bf16_to_f32(h.data), tl.float32) if bf16(h) else h) for h in (a, b))
        return orig["create_dot"](self, a, b, d, input_precision, max_num_imprecise_acc)

    def set_grid_dim(self, nx, ny, nz):
        n = nx * ny * nz
        self._tc_progress = [n, 0, time.monotonic(), time.monotonic()] if n >= PROGRESS_MIN_PROGRAMS else None
        return orig["set_grid_dim"](self, nx, ny, nz)

    def set_grid_idx(self, x, y, z):
        p = getattr(self, "_tc_progress", None)
        if p is not None:
            p[1] += 1
            now = time.monotonic()
            if now - p[3] >= PROGRESS_SECONDS:
                p[3] = now
                print(f"tilecraft CPU mode: Triton's interpreter runs a launch's programs one at a time: "
                      f"{p[1]:,} of {p[0]:,} after {now - p[2]:.0f} s", file=sys.stderr, flush=True)
        return orig["set_grid_idx"](self, x, y, z)

    for name, fn in (("binary_op", binary_op), ("unary_op", unary_op), ("create_fma", create_fma),
                     ("create_dot", create_dot), ("set_grid_dim", set_grid_dim), ("set_grid_idx", set_grid_idx)):
        setattr(builder, name, fn)


_PATCHES = {"triton.testing": _patch_testing, "triton.runtime.driver": _patch_driver,
            "triton.runtime.interpreter": _patch_interpreter}


class _Hook:
    """After ``import triton.testing`` / ``triton.runtime.driver``: patch them (CPU mode only)."""

    def __init__(self, state):
        self.state = state

    def find_spec(self, name, path=None, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, patch, self.state)
                return spec
        return None


class _PatchingLoader:
    def __init__(self, loader, patch, state):
        self._loader, self._patch, self._state = loader, patch, state

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._patch(module, self._state)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def install(arch: str) -> dict:
    state = {"arch": arch, "interpret": os.environ.get("TRITON_INTERPRET")}
    os.environ.setdefault("TRITON_INTERPRET", "1")
    state["hook"] = hook = _Hook(state)
    sys.meta_path.insert(0, hook)
    for name, patch in _PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name], state)
    return state


def uninstall(state: dict) -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if f is not state["hook"]]
    testing = sys.modules.get("triton.testing")
    if testing is not None and state.get("do_bench") is not None:
        testing.do_bench = state["do_bench"]
    if "driver" in state:
        state["driver"]._active = None   # the real driver again, created when next asked for
    if "interpreter" in state:
        builder, orig = state["interpreter"]
        for name, fn in orig.items():
            setattr(builder, name, fn)
    if state["interpret"] is None:
        os.environ.pop("TRITON_INTERPRET", None)

"""Running fuzzed programs: load the rendered modules, run them, compare with torch.

A program's module (see fuzz_gen) gives the kernel (`FZ_FUNC`), its fresh random inputs
(`fz_inputs`), the torch reference (`fz_reference`) and its tolerance class (`FZ_TOL`).  Every
parameter is passed in (outputs pre-filled with random values), so a kernel that writes where
it must not -- into an input, or outside the part of an output it owns -- is caught too: inputs
must come back unchanged and outputs must equal the reference everywhere.

Tolerances, per tolerance class (the least precise dtype a program computes in); with
`scale = max(1, max |expected|)`, an element passes when
`|got - expected| <= atol * scale + rtol * |expected|`:

| class    | atol | rtol | why |
| float32  | 1e-4 | 1e-4 | summation order (gemm, reduce, atomics), libm ulps of tanh/sigmoid |
| float16  | 1e-2 | 1e-2 | one or two 16-bit roundings that differ between lowerings (per-step vs per-tile accumulator stores) |
| bfloat16 | 4e-2 | 4e-2 | as float16 with 8 bits of mantissa |
| int32    | 0    | 0    | integer programs are exact |

NaN and infinity must appear at the same places on both sides.
"""
from __future__ import annotations

import importlib.util
import os
import random
import sys

import torch

TOLERANCES = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (4e-2, 4e-2), "int32": (0.0, 0.0)}


def load_module(path: str):
    """Import the program module at `path` (the parser reads the kernel's source from it)."""
    name = "tcfuzz_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def inputs_of(mod, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    return mod.fz_inputs(g)


def expected_of(mod, inputs: list) -> dict:
    """param index -> the full expected tensor, for every parameter (inputs expected unchanged)."""
    want = {i: t.clone() for i, t in enumerate(inputs)}
    want.update(mod.fz_reference(*[t.clone() for t in inputs]))
    return want


def mismatch(got, want, tol: str) -> str:
    """'' when `got` matches `want` within the tolerance class, else a one-line summary."""
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    if got.dtype == want.dtype and got.device == want.device and torch.equal(got, want):
        return ""   # the common case, cheaply (NaNs never compare equal: they take the full check)
    g, w = got.detach().cpu().double(), want.detach().cpu().double()
    if tol == "int32" and not got.dtype.is_floating_point and not want.dtype.is_floating_point:
        bad = g != w
    else:
        atol, rtol = TOLERANCES.get(tol, TOLERANCES["float32"])
        finite = torch.isfinite(w)
        scale = max(1.0, float(w[finite].abs().max()) if finite.any() else 1.0)
        same_special = (g == w) | (torch.isnan(g) & torch.isnan(w))
        bad = ~(((g - w).abs() <= atol * scale + rtol * w.abs()) & finite | same_special)
    n = int(bad.sum())
    if n == 0:
        return ""
    idx = tuple(int(x) for x in bad.nonzero()[0])
    return (f"{n} of {bad.numel()} elements differ (tolerance {tol}); first at {list(idx)}: "
            f"got {g[idx].item():.6g}, expected {w[idx].item():.6g}")


def run_once(kernel, mod, seed: int, device: str = "cpu", wait=None):
    """(arguments after the run, '') or (None, why it failed to run): `kernel` on the program's
    fresh inputs (every parameter passed in, outputs pre-filled with random values).  On a GPU,
    `wait()` (default: synchronize) waits for the kernel; it may raise (a watchdog)."""
    args = [t.to(device) for t in inputs_of(mod, seed)]
    try:
        kernel(*args)
        if device != "cpu":
            (wait or torch.cuda.synchronize)()
    except Exception as e:  # noqa: BLE001 - a crash at run time is a finding
        return None, f"run failed: {type(e).__name__}: {str(e)[:500]}"
    return args, ""


def compare(args: list, want: dict, mod) -> str:
    """'' when every parameter of `want` (index -> tensor) matches `args`, else what differed."""
    for i, w in want.items():
        bad = mismatch(args[i], w, mod.FZ_TOL)
        if bad:
            role = "output" if i in mod.FZ_OUTPUTS else "input (must stay unchanged)"
            return f"parameter {i} ({role}): {bad}"
    return ""


def run_and_compare(kernel, mod, seed: int, device: str = "cpu", expected=None) -> str:
    """Run `kernel` on the program's inputs; '' when every parameter matches `expected`
    (the torch reference by default), else what differed."""
    want = expected if expected is not None else expected_of(mod, inputs_of(mod, seed))
    args, why = run_once(kernel, mod, seed, device)
    return why or compare(args, want, mod)


# ---- tensors across processes (the parallel fuzzer's workers send references back) --------------

def pack(t) -> tuple:
    """A CPU tensor as plain picklable data (no shared-memory handles: thousands of them would
    exhaust file descriptors)."""
    t = t.detach().cpu().contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return str(t.dtype).replace("torch.", ""), tuple(t.shape), raw


def unpack(packed: tuple):
    dtype, shape, raw = packed
    dt = getattr(torch, dtype)
    if not raw:
        return torch.empty(shape, dtype=dt)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dt).reshape(shape)


class Program:
    """Program `index` of `seed`: its spec (from its own random stream), the module rendered to
    `workdir`/<name>.py and imported (`mod`, `func`), or `error` when the parser rejected it."""

    def __init__(self, seed: int, index: int, workdir: str, spec: dict | None = None):
        from .fuzz_gen import random_spec, render
        self.seed, self.index = seed, index
        self.spec = spec or random_spec(random.Random(f"{seed}:{index}"), f"fz_{seed}_{index}")
        self.name = self.spec["name"]
        self.path = os.path.join(workdir, f"{self.name}.py")
        with open(self.path, "w") as f:
            f.write(render(self.spec))
        self.mod = self.func = None
        self.error = ""
        try:
            self.mod = load_module(self.path)
            self.func = self.mod.FZ_FUNC
        except Exception as e:  # noqa: BLE001 - a valid program the parser rejects is a finding
            self.error = f"parse: {type(e).__name__}: {str(e)[:500]}"

    @property
    def data_seed(self) -> int:
        return self.seed * 100003 + self.index

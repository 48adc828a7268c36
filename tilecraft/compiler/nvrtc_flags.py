"""nvcc spellings in user compile flags (`jit(compile_flags=...)`, `tl.device_compile_flags`)
that NVRTC does not take, translated or dropped before NVRTC sees them.

TileLang programs pass nvcc's flags (TileLang compiles with nvcc); NVRTC rejects several of them
and the compile fails.  Each is translated when NVRTC has the same option, else dropped with a
warning naming it once, and the reason (never silently):

- `--ptxas-options=a,b` (nvcc's comma list) -> one `--ptxas-options=` per option;
- `-O<n>`: NVRTC always optimises (tilecraft passes `--dopt=on`, and `-O3` to ptxas): dropped;
- `-W...` warning controls: they change no code: dropped;
- `--expt-relaxed-constexpr`, `--expt-extended-lambda` (and `-expt-*`): NVRTC has neither, and
  tilecraft's generated code needs neither: dropped.
"""
from __future__ import annotations

import warnings

_WARNED: set = set()

_DROP = {
    "-O": "NVRTC always optimises (--dopt=on; ptxas gets -O3)",
    "-W": "a warning control; it changes no code",
    "--expt-": "an nvcc language extension NVRTC does not have; tilecraft's generated code does not need it",
    "-expt-": "an nvcc language extension NVRTC does not have; tilecraft's generated code does not need it",
}


def nvrtc_flags(flags) -> list:
    out = []
    for f in flags:
        f = str(f)
        if f.startswith("--ptxas-options=") and "," in f:
            out += [f"--ptxas-options={o}" for o in f.split("=", 1)[1].split(",") if o]
            continue
        why = next((w for p, w in _DROP.items() if f.startswith(p) and not f.startswith("-Xptxas")), None)
        if why is None:
            out.append(f)
            continue
        if f not in _WARNED:
            _WARNED.add(f)
            warnings.warn(f"compile flag {f!r} is not applied with NVRTC: {why} (TILECRAFT_CUDA_COMPILER=nvcc "
                          f"passes it to nvcc)", UserWarning, stacklevel=3)
    return out

"""``tilecraft doctor``: check everything tilecraft needs on this machine and say how to fix it.

Each check gives one line: OK, WARN (something optional is missing, e.g. no GPU) or FAIL
(something that stops tilecraft from working), what was found, and for every problem a one-line
fix.  Nothing here needs a GPU: on a machine without one the GPU lines are warnings and the CPU
target (the C++ compiler) decides the exit status.

    tilecraft doctor            # the table; exit 0 when the CPU target compiles and runs
    python -m tilecraft doctor
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

OK, WARN, FAIL = "OK", "WARN", "FAIL"

__all__ = ["Check", "run_checks", "main", "OK", "WARN", "FAIL"]


@dataclass
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""


def _first_line(text: str, width: int = 110) -> str:
    for line in str(text).strip().splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= width else line[: width - 3] + "..."
    return ""


def _tool_version(path: str, flag: str = "--version", pick: Callable[[str], bool] | None = None) -> str:
    try:
        out = subprocess.run([path, flag], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as e:
        return f"(cannot run: {e})"
    lines = [ln.strip() for ln in (out.stdout or out.stderr).splitlines() if ln.strip()]
    if pick is not None:
        lines = [ln for ln in lines if pick(ln)] or lines
    return lines[0] if lines else ""


# ------------------------------------------------------------------------------------ checks
def check_python() -> Check:
    v = sys.version_info
    detail = f"{platform.python_version()} ({sys.executable})"
    if v < (3, 10):
        return Check("python", FAIL, detail, "tilecraft needs Python >= 3.10")
    return Check("python", OK, detail)


def check_tilecraft() -> Check:
    import tilecraft
    return Check("tilecraft", OK, f"{tilecraft.__version__} ({Path(tilecraft.__file__).parent})")


def check_settings() -> Check:
    from . import env
    try:
        values = env.snapshot()
    except ValueError as e:
        return Check("settings", FAIL, _first_line(e), "fix or unset that environment variable")
    changed = [k.source() for k in env.all_knobs() if k.source() is not None]
    detail = "cuda compiler " + str(values["cuda_compiler"])
    if changed:
        detail += "; set: " + ", ".join(changed)
    return Check("settings", OK, detail)


def check_torch() -> tuple[Check, object | None]:
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure is the finding
        return Check("torch", FAIL, f"cannot import torch: {_first_line(e)}", "pip install torch"), None
    cuda = torch.version.cuda
    detail = f"{torch.__version__}" + (f" (built for CUDA {cuda})" if cuda else " (CPU-only build)")
    return Check("torch", OK, detail), torch


def check_gpu(torch) -> Check:
    if torch is None:
        return Check("GPU", WARN, "unknown (torch is missing)", "pip install torch")
    if torch.version.cuda is None:
        return Check("GPU", WARN, "this torch build has no CUDA support: kernels run on the CPU target",
                     "for a GPU: pip install torch --index-url https://download.pytorch.org/whl/cu128")
    try:
        available = torch.cuda.is_available()
    except Exception as e:  # noqa: BLE001
        return Check("GPU", WARN, f"torch.cuda.is_available() failed: {_first_line(e)}",
                     "check the NVIDIA driver with nvidia-smi")
    if not available:
        hint = "check the NVIDIA driver with nvidia-smi"
        if os.environ.get("CUDA_VISIBLE_DEVICES", None) is not None:
            hint += f" (CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r} is set)"
        return Check("GPU", WARN, "no CUDA GPU visible to torch: kernels run on the CPU target", hint)
    from .target import ARCHS
    names = []
    supported = True
    for i in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(i)
        names.append(f"{i}: {torch.cuda.get_device_name(i)} (sm_{major}{minor})")
        sm = major * 10 + minor
        if not any(a.startswith(f"sm_{sm}") for a in ARCHS):
            supported = False
    detail = "; ".join(names)
    if not supported:
        return Check("GPU", WARN, detail, f"tilecraft generates code for {', '.join(ARCHS)}; "
                     "other GPUs are not supported yet (use target='cpu')")
    return Check("GPU", OK, detail)


def check_driver() -> tuple[Check, tuple[int, int] | None]:
    try:
        from cuda.bindings import driver
    except ImportError:
        return Check("driver", WARN, "cuda-bindings is not installed (needed to run on a GPU)",
                     "pip install cuda-bindings"), None
    try:
        err, version = driver.cuDriverGetVersion()
    except Exception as e:  # noqa: BLE001 - libcuda.so missing raises from cuda.pathfinder
        what = ("libcuda.so not found" if "NotFound" in type(e).__name__ or "not found" in str(e).lower()
                else _first_line(e, 70))
        return Check("driver", WARN, f"no NVIDIA driver ({what})",
                     "install the NVIDIA driver to run on a GPU (not needed for target='cpu')"), None
    if int(err) != 0:
        return Check("driver", WARN, f"cuDriverGetVersion failed: {err}", "reinstall the NVIDIA driver"), None
    major, minor = version // 1000, (version % 1000) // 10
    return Check("driver", OK, f"CUDA driver {major}.{minor}"), (major, minor)


def _tiny_program(n: int = 1000):
    import tilecraft.language as T

    @T.prim_func
    def doctor_add(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < n:
                    C[bx * 128 + i] = A[bx * 128 + i] + B[bx * 128 + i] * 2.0
    return doctor_add


def _compile_fresh(target):
    """Compile the tiny program for ``target`` with the disk cache off, so the compiler really runs."""
    import tilecraft
    from . import env
    with env.override(disable_cache=True):
        t0 = time.perf_counter()
        kernel = tilecraft.compile(_tiny_program(), out_idx=[-1], target=target)
        return kernel, time.perf_counter() - t0


PTXAS_CLAMP_BUG = (13, 0)   # NVRTC / ptxas version with the sm_90 clamp-compare miscompile (benchmarks/NOTES.md)


def check_nvrtc(driver_version: tuple[int, int] | None) -> Check:
    from .compiler import CompileError, nvrtc_version
    try:
        major, minor = nvrtc_version()
    except CompileError as e:
        return Check("NVRTC", WARN, _first_line(e.args[0] if e.args else e, 90),
                     "pip install cuda-bindings nvidia-cuda-nvrtc  (CUDA kernels need it)")
    except Exception as e:  # noqa: BLE001
        return Check("NVRTC", WARN, f"NVRTC could not be loaded: {_first_line(e, 80)}",
                     "pip install cuda-bindings nvidia-cuda-nvrtc")
    from . import env
    try:
        with env.override(cuda_compiler="nvrtc"):
            _, seconds = _compile_fresh({"kind": "cuda", "arch": "sm_80"})
    except Exception as e:  # noqa: BLE001 - the first line of any failure is the finding
        return Check("NVRTC", FAIL, f"{major}.{minor}, but compiling a kernel for sm_80 failed: {_first_line(e, 80)}",
                     "the CUDA headers (cuda_fp16.h) must match NVRTC: pip install nvidia-cuda-nvrtc "
                     "or set CUDA_HOME to a CUDA toolkit")
    detail = f"{major}.{minor}; compiled a kernel for sm_80 in {seconds * 1e3:.0f} ms"
    if (major, minor) == PTXAS_CLAMP_BUG:
        return Check("NVRTC", WARN, detail + "; its ptxas miscompiles, for sm_90, an integer clamp compared with its "
                     "bound: `max(0, min(x, C)) == C` reads as its opposite (a VIMNMX.RELU predicate; found by "
                     "session 25, NVRTC 13.5 compiles it right)",
                     "pip install -U nvidia-cuda-nvrtc  (13.5 or later; nvcc 13.0 has the same ptxas)")
    if driver_version is not None and driver_version[0] < major:
        return Check("NVRTC", WARN, detail + f" (but the driver is CUDA {driver_version[0]}.{driver_version[1]})",
                     f"update the NVIDIA driver to CUDA {major}.x, or install the NVRTC of your driver "
                     f"(pip install nvidia-cuda-nvrtc-cu{driver_version[0]})")
    return Check("NVRTC", OK, detail)


def check_nvcc() -> Check:
    from . import env
    from .compiler import find_nvcc
    nvcc = find_nvcc()
    selected = env.cuda_compiler() == "nvcc"
    if nvcc is None:
        return Check("nvcc", FAIL if selected else WARN,
                     "not found" + (" but TILECRAFT_CUDA_COMPILER=nvcc" if selected else " (optional: NVRTC is the default)"),
                     "install the CUDA toolkit and put its bin/ on PATH (or set CUDA_HOME)"
                     + ("" if not selected else ", or unset TILECRAFT_CUDA_COMPILER"))
    version = _tool_version(nvcc, pick=lambda ln: "release" in ln)
    return Check("nvcc", OK, f"{nvcc}: {version}")


def check_cuda_tools() -> Check:
    from .compiler import find_cuda_tool
    found = {name: find_cuda_tool(name) for name in ("cuobjdump", "nvdisasm")}
    missing = [n for n, p in found.items() if p is None]
    detail = "; ".join(f"{n} {p}" for n, p in found.items() if p) or "neither found"
    if missing:
        return Check("cuobjdump/nvdisasm", WARN, detail + f" (missing: {', '.join(missing)}; needed only for SASS)",
                     "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
    return Check("cuobjdump/nvdisasm", OK, detail)


def check_cxx() -> Check:
    import shutil
    from . import env
    cxx = env.cxx()
    path = shutil.which(cxx) or (cxx if os.path.isfile(cxx) else None)
    if path is None:
        return Check("C++ compiler", FAIL, f"{cxx!r} not found",
                     "install g++ (apt-get install g++) or set TILECRAFT_CXX / CXX to a C++17 compiler")
    version = _tool_version(path)
    try:
        import torch
        kernel, seconds = _compile_fresh("cpu")
        a = torch.arange(1000, dtype=torch.float32)
        b = torch.ones(1000, dtype=torch.float32)
        c = kernel(a, b)
        if not torch.equal(c, a + 2 * b):
            return Check("C++ compiler", FAIL, f"{version}: the CPU kernel gave wrong results",
                         "report this as a tilecraft bug (with the output of `tilecraft doctor`)")
    except Exception as e:  # noqa: BLE001
        return Check("C++ compiler", FAIL, f"{version}: compiling a CPU kernel failed: {_first_line(e, 70)}",
                     "the CPU target needs a C++17 compiler with OpenMP (apt-get install g++ libgomp1), "
                     "or set TILECRAFT_CXX")
    return Check("C++ compiler", OK, f"{version}; compiled and ran a CPU kernel in {seconds * 1e3:.0f} ms")


def check_openmp() -> Check:
    """The wait policy of the OpenMP runtime the CPU kernels (and torch's operators) share."""
    from .runtime.openmp import wait_policy
    policy = wait_policy()
    if policy.startswith("spin"):
        return Check("OpenMP wait", WARN, policy, "under load a spinning thread takes its sibling's core "
                     "(a 0.1 ms kernel measured 8 ms with two busy loops beside it)")
    return Check("OpenMP wait", OK, policy)


def check_cache() -> Check:
    from . import env
    from .compiler.cache import cache_info
    try:
        root = env.cache_dir()
    except ValueError as e:
        return Check("cache", FAIL, _first_line(e), "fix TILECRAFT_CACHE_DIR")
    fix = "set TILECRAFT_CACHE_DIR to a writable directory"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-", delete=True) as f:
            f.write(b"ok")
            f.flush()
    except OSError as e:
        return Check("cache", FAIL, f"{root} is not writable: {e.strerror or e}", fix)
    info = cache_info()
    detail = f"{root}: {info['entries']} entries, {info['bytes'] / 2**20:.1f} MiB"
    if info["disabled"]:
        return Check("cache", WARN, detail + " (disabled by TILECRAFT_DISABLE_CACHE)",
                     "unset TILECRAFT_DISABLE_CACHE to reuse compiled kernels")
    return Check("cache", OK, detail)


# ------------------------------------------------------------------------------------ driver
def run_checks() -> list[Check]:
    """Every check in order; a check that crashes becomes a FAIL line, never a traceback."""
    checks = [_safe(check_python, "python"), _safe(check_tilecraft, "tilecraft"), _safe(check_settings, "settings")]
    torch_check, torch = _safe(check_torch, "torch", pair=True)
    checks += [torch_check, _safe(lambda: check_gpu(torch), "GPU")]
    driver_check, driver_version = _safe(check_driver, "driver", pair=True)
    checks += [driver_check, _safe(lambda: check_nvrtc(driver_version), "NVRTC"), _safe(check_nvcc, "nvcc"),
               _safe(check_cuda_tools, "cuobjdump/nvdisasm"), _safe(check_cxx, "C++ compiler"),
               _safe(check_openmp, "OpenMP wait"), _safe(check_cache, "cache")]
    return checks


def _safe(fn: Callable, name: str, pair: bool = False):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - a crashing check is itself a finding, not a traceback
        check = Check(name, FAIL, f"the check crashed: {type(e).__name__}: {_first_line(e, 80)}",
                      "report this as a tilecraft bug (with the output of `tilecraft doctor`)")
        return (check, None) if pair else check


def format_table(checks: list[Check]) -> str:
    w_name = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{c.status:<4}  {c.name:<{w_name}}  {c.detail}")
        if c.fix and c.status != OK:
            lines.append(f"{'':<4}  {'':<{w_name}}  fix: {c.fix}")
    return "\n".join(lines)


def main() -> int:
    print("tilecraft doctor: checking this machine (no GPU needed)\n", flush=True)
    checks = run_checks()
    print(format_table(checks))
    by = {c.name: c for c in checks}
    cpu_ok = by.get("C++ compiler") is not None and by["C++ compiler"].status == OK
    gpu_ok = by.get("GPU") is not None and by["GPU"].status == OK
    n_fail = sum(c.status == FAIL for c in checks)
    n_warn = sum(c.status == WARN for c in checks)
    print()
    if cpu_ok and gpu_ok and n_fail == 0:
        verdict = "ready: kernels compile for the CPU and run on the GPU"
    elif cpu_ok:
        verdict = ("the CPU target works" + ("" if gpu_ok else "; no usable GPU, so target='auto' means the CPU")
                   + (f" ({n_fail} problem(s) above)" if n_fail else ""))
    else:
        verdict = "the CPU target does not work: see the fix for 'C++ compiler' above"
    print(f"{verdict}. {n_fail} FAIL, {n_warn} WARN.")
    return 0 if cpu_ok else 1

"""Every environment knob tilecraft reads, in one typed module.

This is the only module of the package that reads ``os.environ`` (the pattern of triton's
``knobs.py``): each knob is declared once below with its type, default and meaning, and read at
call time, so a test can ``monkeypatch.setenv`` and see the effect immediately.

Names: ``TILECRAFT_<NAME>`` wins; the TileLang spelling ``TILELANG_<NAME>`` is honoured as an
alias so that scripts written for TileLang keep their settings. A few knobs also fall back to a
conventional variable (``CXX``, ``CUDA_HOME``).

Use the functions (``env.cache_dir()``, ``env.cache_disabled()``, ...) or the ``env.knobs``
object (``env.knobs.cache_dir``); ``env.snapshot()`` returns every current value and
``env.describe()`` a readable table of them. Python code may override a knob
(``env.set_knob("disable_cache", True)``, ``with env.override(...)``, ``env.disable_cache()``);
an override wins over the environment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, Iterator, TypeVar

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f", ""}
CUDA_COMPILERS = ("nvrtc", "nvcc")


def _parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"environment variable {name}={raw!r}: expected a boolean (1/0, true/false, on/off)")


def _parse_int(name: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r}: expected an integer") from None


def _parse_count(name: str, raw: str) -> int:
    value = _parse_int(name, raw)
    if value < 0:
        raise ValueError(f"environment variable {name}={raw!r}: expected a count (0 or more)")
    return value


def _parse_path(name: str, raw: str) -> Path:
    return Path(raw).expanduser()


def _parse_cuda_compiler(name: str, raw: str) -> str:
    value = raw.strip().lower()
    if value not in CUDA_COMPILERS:
        raise ValueError(f"environment variable {name}={raw!r}: expected one of {', '.join(CUDA_COMPILERS)}")
    return value


LAUNCHERS = ("c", "capi", "python")


def _parse_launcher(name: str, raw: str) -> str:
    value = raw.strip().lower()
    if value not in LAUNCHERS:
        raise ValueError(f"environment variable {name}={raw!r}: expected one of {', '.join(LAUNCHERS)}")
    return value


def _parse_json_object(name: str, raw: str) -> dict:
    import json
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as e:
        raise ValueError(f"environment variable {name}={raw!r}: expected a JSON object ({e.msg})") from None
    if not isinstance(value, dict):
        raise ValueError(f"environment variable {name}={raw!r}: expected a JSON object like "
                         f'{{"tc.use_wgmma": true}}')
    return value


def _parse_executor(name: str, raw: str) -> str:
    value = raw.strip().lower() or "local"
    if value not in ("local", "ray"):
        raise ValueError(f"{name}={raw!r}: expected 'local' or 'ray'")
    return value


def _parse_text(name: str, raw: str) -> str:
    return raw.strip()


def _parse_seconds(name: str, raw: str) -> float | None:
    if not raw.strip():
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"environment variable {name}={raw!r}: expected a number of seconds (more than 0)")
    return value


def _default_cxx() -> str:
    for candidate in ("g++", "c++", "clang++"):
        found = shutil.which(candidate)
        if found:
            return found
    return "g++"


def _default_cuda_home() -> Path | None:
    path = Path("/usr/local/cuda")
    if path.is_dir():
        return path
    nvcc = shutil.which("nvcc")
    return Path(nvcc).resolve().parent.parent if nvcc else None


@dataclass(frozen=True)
class Knob(Generic[T]):
    """One setting: the variable names tried in order, how to parse the text, and a default.

    ``default`` is either a value or a zero-argument callable (for defaults that need a lookup,
    such as finding ``g++`` on ``PATH``); it is evaluated only when no variable is set.
    """

    key: str
    names: tuple[str, ...]
    parse: Callable[[str, str], T]
    default: Any
    doc: str
    secret: bool = False  # never printed (describe() shows whether it is set)

    def source(self) -> str | None:
        """Where the current value comes from: "override", a variable name, or None (default)."""
        if self.key in _overrides:
            return "override"
        for name in self.names:
            if name in os.environ:
                return name
        return None

    def get(self) -> T:
        if self.key in _overrides:
            return _overrides[self.key]
        name = self.source()
        if name is not None:
            return self.parse(name, os.environ[name])
        return self.default() if callable(self.default) else self.default

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else self.get()


# Values set from Python (``set_knob``/``override``, ``tilecraft.disable_cache()``); they win
# over the environment. Forked workers inherit them with the rest of the process.
_overrides: dict[str, Any] = {}


def _knob(name: str, parse: Callable[[str, str], T], default: Any, doc: str, extra: tuple[str, ...] = (),
          secret: bool = False) -> Knob[T]:
    return Knob(name.lower(), (f"TILECRAFT_{name}", f"TILELANG_{name}", *extra), parse, default, doc, secret)


class Knobs:
    """All knobs as attributes; each attribute access reads the environment afresh."""

    cache_dir: Path = _knob(
        "CACHE_DIR", _parse_path, lambda: Path.home() / ".cache" / "tilecraft",
        "root of the on-disk caches (compiled kernels, autotuning results)")
    disable_cache: bool = _knob(
        "DISABLE_CACHE", _parse_bool, False, "never read or write the on-disk kernel cache")
    auto_tuning_disable_cache: bool = _knob(
        "AUTO_TUNING_DISABLE_CACHE", _parse_bool, False,
        "re-tune every time instead of reusing autotuning results stored on disk")
    cache_url: str = _knob(
        "CACHE_URL", _parse_text, "",
        "a shared compile cache: redis://host:port/db (behind the local disk cache) or a shared directory "
        "(file:///path or a path); needs TILECRAFT_CACHE_KEY (compiler/shared_cache.py)")
    cache_key: str = _knob(
        "CACHE_KEY", _parse_text, "",
        "the team's secret for signing cache entries (HMAC-SHA256); when set, unsigned or foreign entries "
        "are refused and rebuilt", secret=True)
    autotune_executor: str = _knob(
        "AUTOTUNE_EXECUTOR", _parse_executor, "local",
        "where autotuning compiles and benchmarks: local (forked processes) or ray (a Ray cluster)")
    ray_address: str = _knob(
        "RAY_ADDRESS", _parse_text, "",
        "the Ray cluster the ray executor joins (ray.init(address=...)); empty: a local one", extra=("RAY_ADDRESS",))
    tuning_db: Path = _knob(
        "TUNING_DB", _parse_path, lambda: cache_dir() / "tuning.sqlite",
        "the SQLite tuning database (default <cache dir>/tuning.sqlite)")
    auto_tuning_max_cpu_count: int = _knob(
        "AUTO_TUNING_MAX_CPU_COUNT", _parse_int, -1,
        "most processes compiling autotuning configs at once (-1: one per CPU core)")
    print_on_compilation: bool = _knob(
        "PRINT_ON_COMPILATION", _parse_bool, False, "print a line for every kernel compiled")
    verbose: bool = _knob("VERBOSE", _parse_bool, False, "log what the compiler, cache and autotuner do")
    cuda_compiler: str = _knob(
        "CUDA_COMPILER", _parse_cuda_compiler, "nvrtc", "how CUDA C++ becomes a cubin: nvrtc or nvcc")
    nvrtc_pch: bool = _knob(
        "NVRTC_PCH", _parse_bool, True,
        "NVRTC precompiled headers for the device library (compiler/nvrtc_pch.py; same cubins, faster compiles)")
    cxx: str = _knob("CXX", lambda name, raw: raw.strip(), _default_cxx,
                     "C++ compiler for the CPU target", extra=("CXX",))
    pass_configs: dict = _knob(
        "PASS_CONFIGS", _parse_json_object, dict,
        "pass_configs every compile starts from, as a JSON object; a kernel's own pass_configs win")
    launcher: str = _knob(
        "LAUNCHER", _parse_launcher, "c",
        "how a cached static kernel is called: c (compiled launcher, torch-aware build first), capi "
        "(compiled against Python.h only) or python (generated Python call); see runtime/claunch.py")
    launcher_dir: Path = _knob(
        "LAUNCHER_DIR", _parse_path, lambda: Path.home() / ".cache" / "tilecraft-launcher",
        "where the compiled launcher is built once per Python, torch and compiler (apart from the "
        "kernel cache, so a fresh TILECRAFT_CACHE_DIR does not rebuild it)")
    run_on_cpu: bool = _knob(
        "RUN_ON_CPU", _parse_bool, False,
        "CPU mode: a program written for CUDA runs unchanged on the CPU target (tilecraft/compat/cpu_mode.py); "
        "read at `import tilecraft`")
    also_compile: str = _knob(
        "ALSO_COMPILE", lambda name, raw: raw.strip(), "",
        "CPU mode: every kernel is also compiled (not launched) for this CUDA arch, e.g. sm_90a")
    cpu_arch: str = _knob(
        "CPU_ARCH", lambda name, raw: raw.strip(), "",
        "CPU mode: the GPU architecture torch.cuda reports (get_device_capability, names, properties), e.g. "
        "sm_120 for a program that demands one; default: the ALSO_COMPILE arch, else sm_90a.  Only what the "
        "program sees changes: the CPU target runs every construct it has whatever the arch")
    cpu_autotune_configs: int = _knob(
        "CPU_AUTOTUNE_CONFIGS", _parse_count, 1,
        "CPU mode: autotuning checks (compiles, runs against the reference, times) configs in their order "
        "until this many pass and skips the rest (host timings say nothing about the GPU the program "
        "targets); 0: every config, as on a GPU")
    cpu_bench_reps: int = _knob(
        "CPU_BENCH_REPS", _parse_count, 10,
        "CPU mode: a timing (do_bench, the profiler, triton.testing.do_bench, autotuning) makes one untimed "
        "call, then at most this many timed calls, stopping once its `rep` milliseconds are spent (at least "
        "one); 0: the counts the program asks for, as on a GPU")
    cpu_spin_seconds: float | None = _knob(
        "CPU_SPIN_SECONDS", _parse_seconds, None,
        "CPU target, thread-level mode: a block whose threads only spin in `while` loops on memory this "
        "long is reported as deadlocked; default (unset) 8 s (tilecraft_cpu_threads.h).  Read when a "
        "kernel library is loaded")
    cuda_home: Path | None = _knob("CUDA_HOME", _parse_path, _default_cuda_home,
                                   "CUDA toolkit root (nvcc, headers)", extra=("CUDA_HOME", "CUDA_PATH"))


knobs = Knobs()


def all_knobs() -> list[Knob[Any]]:
    """Every declared knob, in declaration order."""
    return [v for v in vars(Knobs).values() if isinstance(v, Knob)]


def cache_dir() -> Path:
    """Root directory of the on-disk caches (``TILECRAFT_CACHE_DIR``, default ``~/.cache/tilecraft``)."""
    return knobs.cache_dir


def cache_disabled() -> bool:
    """True when ``TILECRAFT_DISABLE_CACHE`` is set: the disk cache always misses and stores nothing."""
    return knobs.disable_cache


def autotune_cache_disabled() -> bool:
    """True when tuning results must not be read from or written to disk."""
    return knobs.auto_tuning_disable_cache or knobs.disable_cache


def autotune_max_workers() -> int:
    """How many processes may compile autotuning configs at once: the knob capped by the CPU count."""
    cpus = os.cpu_count() or 1
    cap = knobs.auto_tuning_max_cpu_count
    return max(1, cpus if cap is None or cap <= 0 else min(cap, cpus))


def cache_url() -> str:
    """``TILECRAFT_CACHE_URL``: the shared cache's address, or ``""``."""
    return knobs.cache_url


def cache_signing_key() -> bytes | None:
    """``TILECRAFT_CACHE_KEY`` as bytes, or None when unset or empty."""
    key = knobs.cache_key
    return key.encode("utf-8") if key else None


def autotune_executor() -> str:
    """``TILECRAFT_AUTOTUNE_EXECUTOR``: ``"local"`` (default) or ``"ray"``."""
    return knobs.autotune_executor


def ray_address() -> str | None:
    """``TILECRAFT_RAY_ADDRESS`` (or ``RAY_ADDRESS``); None: start a local Ray."""
    return knobs.ray_address or None


def tuning_db() -> Path:
    """``TILECRAFT_TUNING_DB``: the tuning database's file."""
    return knobs.tuning_db


def print_on_compilation() -> bool:
    """Print a line per compiled kernel (also on when ``TILECRAFT_VERBOSE`` is set)."""
    return knobs.print_on_compilation or knobs.verbose


def verbose() -> bool:
    return knobs.verbose


def cuda_compiler() -> str:
    """``"nvrtc"`` (default, in-process) or ``"nvcc"``."""
    return knobs.cuda_compiler


def cxx() -> str:
    """The C++ compiler for the CPU target: ``TILECRAFT_CXX``, then ``CXX``, then g++/c++ on PATH."""
    return knobs.cxx


def launcher() -> str:
    """``TILECRAFT_LAUNCHER``: ``"c"`` (default), ``"capi"`` or ``"python"``."""
    return knobs.launcher


def launcher_dir() -> Path:
    """``TILECRAFT_LAUNCHER_DIR``: where the compiled launcher is built (default ~/.cache/tilecraft-launcher)."""
    return knobs.launcher_dir


def default_pass_configs() -> dict:
    """``TILECRAFT_PASS_CONFIGS`` (a JSON object): pass_configs under every kernel's own."""
    return dict(knobs.pass_configs)


def cpu_spin_seconds() -> float | None:
    """``TILECRAFT_CPU_SPIN_SECONDS``: the thread-level mode's spin limit in seconds; None: the header's 8 s."""
    return knobs.cpu_spin_seconds


def cuda_home() -> Path | None:
    """The CUDA toolkit root, or None when none is found."""
    return knobs.cuda_home


def _knob_named(key: str) -> Knob[Any]:
    for k in all_knobs():
        if k.key == key:
            return k
    raise KeyError(f"unknown knob {key!r}; known: {[k.key for k in all_knobs()]}")


def set_knob(key: str, value: Any) -> None:
    """Set knob ``key`` (e.g. ``"disable_cache"``) from Python; ``None`` returns it to the environment."""
    knob = _knob_named(key)
    if isinstance(value, str):  # the same parsing (and validation) as the environment's text
        value = knob.parse(f"override {key}", value)
    if value is None:
        _overrides.pop(key, None)
    else:
        _overrides[key] = value


@contextlib.contextmanager
def override(**values: Any) -> Iterator[None]:
    """Temporarily set knobs: ``with env.override(disable_cache=True): ...``."""
    saved = {key: _overrides.get(key) for key in values}
    try:
        for key, value in values.items():
            set_knob(key, value)
        yield
    finally:
        for key, value in saved.items():
            set_knob(key, value)


def disable_cache() -> None:
    """TileLang's ``tilelang.disable_cache()``: stop reading and writing the disk cache."""
    set_knob("disable_cache", True)


def enable_cache() -> None:
    set_knob("disable_cache", False)


def is_cache_enabled() -> bool:
    return not cache_disabled()


def snapshot() -> dict[str, Any]:
    """The current value of every knob, keyed by knob name."""
    return {k.key: k.get() for k in all_knobs()}


def describe() -> str:
    """A table of every knob: name, current value, where it came from, meaning."""
    lines = []
    for k in all_knobs():
        src = k.source() or "default"
        value = ("<set>" if k.get() else "<unset>") if k.secret else str(k.get())
        lines.append(f"{k.names[0]:<36} {value:<28} ({src})  {k.doc}")
    return "\n".join(lines)


def __getattr__(name):
    # TileLang's environment attributes (`tilelang.env.TILELANG_CACHE_DIR`), read from the knobs
    if name == "TILELANG_CACHE_DIR":
        return str(cache_dir())
    raise AttributeError(f"module 'tilecraft.env' has no attribute {name!r}")

"""Shared test setup: seeding, and the one mechanism that says what a test needs.

- Every test gets torch seeded from its node id, so a failure reproduces with the same inputs
  when the test is re-run alone (and different tests still see different data).
- What a test needs from the machine is a marker, never an ad-hoc skip in the test body:

  | marker         | needs                                             |
  | `gpu`          | a CUDA GPU (torch.cuda.is_available())            |
  | `sm90`         | a compute capability 9.0 GPU (wgmma, TMA: sm_90a) |
  | `cuda_compile` | NVRTC, to compile CUDA without a GPU              |
  | `nvcc`         | the nvcc compiler                                 |
  | `sass`         | cuobjdump and nvdisasm, to read SASS              |
  | `cxx`          | a C++ compiler (the CPU target)                   |
  | `big_memory`   | ~3 GiB of free host memory (2^31-element tensors) |
  | `redis`        | redis-py and a redis-server binary (scripts/ensure_redis.sh installs it where it can) |
  | `ray`          | the ray package (a local Ray cluster is started by the test's fixture) |

  A test whose requirement is missing is skipped at collection with the reason; nothing else
  skips for want of a tool.  Each requirement is probed once per session.
- `timing`: asserts a relation between measured times.  Off in the CPU tier (a loaded 2-core CI
  machine makes such assertions flaky); it runs on a GPU, or everywhere with TILECRAFT_TIMING_TESTS=1.
- The end of the run prints one line per outcome: passed, failed, and skipped grouped by reason,
  so "skipped: needs a CUDA GPU" is never confused with anything else.
"""
from __future__ import annotations

import gc
import os
import shutil
import zlib
from collections import Counter

import pytest


def _gpu() -> str:
    try:
        import torch
    except ImportError:
        return "needs torch"
    return "" if torch.cuda.is_available() else "needs a CUDA GPU (torch.cuda.is_available() is False)"


def _sm90() -> str:
    why = _gpu()
    if why:
        return why
    import torch
    cap = torch.cuda.get_device_capability()
    return "" if cap == (9, 0) else f"needs a compute capability 9.0 GPU (sm_90a code), this one is {cap}"


def _nvrtc() -> str:
    try:
        from tilecraft.compiler import nvrtc_version
        nvrtc_version()
        return ""
    except Exception as e:  # noqa: BLE001 - any failure to load NVRTC means: not available
        return f"needs NVRTC ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"


def _nvcc() -> str:
    from tilecraft.compiler.nvcc import find_nvcc
    return "" if find_nvcc() else "needs nvcc (not on PATH or under CUDA_HOME)"


def _sass() -> str:
    from tilecraft.compiler.sass import find_cuda_tool
    missing = [t for t in ("cuobjdump", "nvdisasm") if not find_cuda_tool(t)]
    return f"needs {' and '.join(missing)} (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)" if missing else ""


def _cxx() -> str:
    from tilecraft import env
    return "" if shutil.which(env.cxx()) else f"needs a C++ compiler ({env.cxx()!r} not found)"


def _big_memory() -> str:
    """Tests of tensors past 2^31 elements hold ~2-2.5 GiB: skipped when the host has less than
    3.5 GiB available, or with TILECRAFT_SKIP_BIG_MEMORY=1 (a CI machine shared by other jobs)."""
    if os.environ.get("TILECRAFT_SKIP_BIG_MEMORY") == "1":
        return "TILECRAFT_SKIP_BIG_MEMORY=1: tensors past 2^31 elements (~2.5 GiB) not run"
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) for line in f if line.split()[1:]}
        avail = info["MemAvailable"] * 1024
    except (OSError, KeyError, ValueError):
        return "needs ~3.5 GiB of free memory (cannot read /proc/meminfo)"
    return "" if avail >= 3.5 * 2 ** 30 else f"needs ~3.5 GiB of free memory, {avail / 2 ** 30:.1f} GiB available"


def _redis() -> str:
    """redis-py, and a redis-server binary: scripts/ensure_redis.sh finds one or installs it (apt, as
    root); the tests start their own server on a free port. Never mocked: without it they skip."""
    try:
        import redis  # noqa: F401
    except ImportError:
        return "needs the redis package (pip install 'tilecraft[scale]')"
    import subprocess
    import tempfile

    from filelock import FileLock
    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "ensure_redis.sh")
    try:  # one install at a time: every pytest-xdist worker probes (apt-get holds dpkg's lock)
        with FileLock(os.path.join(tempfile.gettempdir(), "tilecraft-ensure-redis.lock")):
            proc = subprocess.run(["bash", script], capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        return f"needs redis-server (scripts/ensure_redis.sh could not run: {e})"
    if proc.returncode != 0:
        return f"needs redis-server ({proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'not found'})"
    os.environ["TILECRAFT_TEST_REDIS_SERVER"] = proc.stdout.strip().splitlines()[-1]
    return ""


def _ray() -> str:
    try:
        import ray  # noqa: F401
    except ImportError:
        return "needs the ray package (pip install 'tilecraft[scale]')"
    return ""


def _timing() -> str:
    """Assertions on measured times flake on a loaded machine, which CI's is: they run only when asked
    for (TILECRAFT_TIMING_TESTS=1); compile-time goals are rows of benchmarks/bench.py's compile group."""
    if os.environ.get("TILECRAFT_TIMING_TESTS") == "1":
        return ""
    return "a timing assertion: runs only with TILECRAFT_TIMING_TESTS=1 (CI's machine is loaded)"


REQUIREMENTS = {
    "gpu": (_gpu, "needs a CUDA GPU"),
    "sm90": (_sm90, "needs a compute capability 9.0 GPU"),
    "cuda_compile": (_nvrtc, "compiles CUDA with NVRTC (no GPU needed)"),
    "nvcc": (_nvcc, "needs nvcc"),
    "sass": (_sass, "reads SASS with cuobjdump and nvdisasm"),
    "cxx": (_cxx, "needs a C++ compiler"),
    "big_memory": (_big_memory, "holds tensors past 2^31 elements (~2.5 GiB of host memory)"),
    "redis": (_redis, "needs redis-py and a redis-server (scripts/ensure_redis.sh)"),
    "ray": (_ray, "needs the ray package"),
    "timing": (_timing, "asserts on measured times (only with TILECRAFT_TIMING_TESTS=1)"),
}
_PROBED: dict = {}


def missing(requirement: str) -> str:
    """'' when the machine has `requirement` (a marker name above), else why not (probed once)."""
    if requirement not in _PROBED:
        _PROBED[requirement] = REQUIREMENTS[requirement][0]()
    return _PROBED[requirement]


def pytest_configure(config):
    for name, (_, what) in REQUIREMENTS.items():
        config.addinivalue_line("markers", f"{name}: {what} (skipped at collection when missing)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in REQUIREMENTS:
            if name in item.keywords:
                why = missing(name)
                if why:
                    item.add_marker(pytest.mark.skip(reason=why))
                    break
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _longest_files_first(items)


def pytest_collection_finish(session):
    """What collection made (torch, tilecraft, every test module and item) lives to the end of the run: it
    leaves the collector's reach, so each full collection (Python's own, and pytest's five at the end) walks
    only what the tests make (the collector's time in a 19 s sample of the suite: 1.29 -> 0.69 s, session 25)."""
    gc.collect()
    gc.freeze()


# The test files that take longest in `make test` (2-core machine, session 22; longest first).  Under
# pytest-xdist (--dist loadfile --no-loadscope-reorder, the Makefile) the workers take files in
# collection order, so these start first: a long file that starts last keeps one worker busy after
# the others are done, and the Ray file, which mostly waits (its cluster, its workers, its timeouts),
# then waits while the others compile.  The other files follow, those with more tests first (what
# pytest-xdist's own reordering does); within a file the order is unchanged.  Only the order changes.
LONG_FILES = (
    "tools/test_autotuner_ray.py", "fuzz/test_fuzz.py", "cuda/test_generated_kernels.py",
    "cuda/test_gemm_header.py", "cuda/test_gemm_sm90_header.py", "tools/test_cli.py",
    "compat/test_cpu_mode.py", "runtime/test_claunch.py", "runtime/test_shared_cache.py",
    "cpu/test_index_width.py", "fuzz/test_fuzz_widen.py", "cpu/test_cpu_threads.py",
    "tools/test_autotuner.py", "cuda/test_persistent_tiles.py", "cuda/test_new_kernels_sm90.py",
    "fuzz/test_fuzz_chain.py", "runtime/test_cpu_kernel_faults.py", "fuzz/test_fuzz_parallel.py",
)


def _longest_files_first(items) -> None:
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    rank = {os.path.join(tests_dir, *f.split("/")): i for i, f in enumerate(LONG_FILES)}
    count: Counter = Counter(str(item.path) for item in items)
    first_seen = {}
    for i, item in enumerate(items):
        first_seen.setdefault(str(item.path), i)

    def key(pair):
        i, item = pair
        path = str(item.path)
        return (rank.get(path, len(rank)), -count[path], first_seen[path], i)
    items[:] = [item for _, item in sorted(enumerate(items), key=key)]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line per outcome, skips grouped by reason (`make test` reads this)."""
    stats = terminalreporter.stats
    count = {k: len([r for r in stats.get(k, []) if getattr(r, "when", "call") in ("call", "setup")])
             for k in ("passed", "failed", "error", "xfailed", "xpassed")}
    reasons: Counter = Counter()
    for r in stats.get("skipped", []):
        lr = r.longrepr
        reason = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
        reasons[reason.replace("Skipped: ", "")] += 1
    tr = terminalreporter
    tr.section("tilecraft test tiers")
    tr.line(f"passed: {count['passed']}   failed: {count['failed'] + count['error']}   "
            f"expected failures (known gaps): {count['xfailed']}   unexpectedly passing: {count['xpassed']}")
    tr.line(f"skipped: {sum(reasons.values())}" + (", by reason:" if reasons else ""))
    for reason, n in reasons.most_common():
        tr.line(f"  {n:5d}  {reason}")


_CUDA_AVAILABLE: list = []


def _seed_torch(torch, seed: int) -> None:
    """torch.manual_seed(seed) where a GPU is; without one, the CPU generator alone, which is all that
    call seeds there: its seeds for the other devices (CUDA, XPU, MTIA) are queued with a captured stack
    each (~2.2 ms a test, ~6 CPU-s a run) and run only if such a device is ever initialised, which on a
    machine without one it never is."""
    if not _CUDA_AVAILABLE:
        _CUDA_AVAILABLE.append(torch.cuda.is_available())
    if _CUDA_AVAILABLE[0]:
        torch.manual_seed(seed)
    else:
        torch.default_generator.manual_seed(seed)


@pytest.fixture(autouse=True)
def _seed_torch_from_node_id(request):
    """Seed torch (and Python's random) from the test's node id: stable per test, distinct across tests."""
    seed = zlib.crc32(request.node.nodeid.encode()) & 0x7FFFFFFF
    try:
        import torch
    except ImportError:
        pass
    else:
        _seed_torch(torch, seed)
    import random
    random.seed(seed)
    yield seed

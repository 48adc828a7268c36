"""OpenMP for the CPU target's kernels: a passive wait policy and a bounded thread count.

Kernels run their blocks on libgomp's threads.  Its default wait policy spins (300,000 rounds) at
every barrier and after every parallel region; on a shared machine a spinning thread takes the core
its sibling needs, and a kernel that takes 1 ms alone took tens of ms under load (issue 22).  So
libgomp is loaded with ``OMP_WAIT_POLICY=PASSIVE`` (unless the user set a policy or a spin count
themselves): waiting threads sleep.  The variable is set only while libgomp reads it (once, when it
is loaded), so subprocesses do not see it.

Which libgomp: torch's wheels bundle one with the soname ``libgomp.so.1``, and a kernel library's
``libgomp.so.1`` binds to whichever copy of that soname the process loaded first -- so torch and the
kernels share one runtime and one wait policy.  Loading it when the first kernel loads (sessions
5-24) came too late wherever torch had been imported before: the policy was torch's spinning
default, and the 1M-element add's median under two busy loops was 8 ms against 0.09 ms unloaded
(session 25).  Now ``import tilecraft`` loads it (torch's own copy when torch bundles one, else the
system's; torch itself is not imported): torch's operators then wait passively too.  A process that
imported torch before tilecraft keeps the spinning default; ``wait_policy()`` says which one is in
effect (``tilecraft doctor`` and the CPU benchmark print it), and setting ``OMP_WAIT_POLICY=PASSIVE``
in the environment, or importing tilecraft first, gives the passive one.

Thread count: each kernel library exports ``tc_num_threads`` (tilecraft_cpu.h), set when it is
loaded to ``torch.get_num_threads()`` (which follows ``OMP_NUM_THREADS`` and
``torch.set_num_threads``), at most the number of CPUs this process may run on.  A thread-level
kernel also exports ``tc_simt_spin_seconds`` (tilecraft_cpu_threads.h), its spin limit, set from
``TILECRAFT_CPU_SPIN_SECONDS`` when that is set.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

_LOADED = False
_POLICY = "not loaded yet"
SONAME = "libgomp.so.1"


def _torch_libgomp() -> str | None:
    """torch's bundled libgomp when its soname is the one kernels link against (found without
    importing torch)."""
    import glob
    import importlib.util
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "lib", SONAME)
        if os.path.isfile(path):
            return path
        if glob.glob(os.path.join(root, "lib", "libgomp-*.so*")):
            return None   # a renamed copy (another soname): the kernels get the system's
    return None


def _already_loaded() -> bool:
    try:
        ctypes.CDLL(SONAME, mode=getattr(os, "RTLD_NOLOAD", 4) | ctypes.RTLD_GLOBAL)
        return True
    except OSError:
        return False


def load_openmp() -> None:
    """Load libgomp with a passive wait policy (once per process; `import tilecraft` calls it)."""
    global _LOADED, _POLICY
    if _LOADED:
        return
    _LOADED = True
    user = os.environ.get("OMP_WAIT_POLICY") or (
        f"GOMP_SPINCOUNT={os.environ['GOMP_SPINCOUNT']}" if "GOMP_SPINCOUNT" in os.environ else None)
    if user is not None:
        _POLICY = f"{user} (set in the environment)"
        return
    if _already_loaded():
        _POLICY = ("spin, then sleep (libgomp's default: it was loaded, by torch, before tilecraft; "
                   "set OMP_WAIT_POLICY=PASSIVE or import tilecraft first)")
        return
    before = os.environ.get("OMP_WAIT_POLICY")   # None, or an empty value libgomp ignores
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        ctypes.CDLL(_torch_libgomp() or ctypes.util.find_library("gomp") or SONAME, mode=ctypes.RTLD_GLOBAL)
        _POLICY = "PASSIVE (set by tilecraft)"
    except OSError:
        _POLICY = "the compiler's OpenMP runtime's default (no libgomp here)"
    finally:
        if before is None:
            del os.environ["OMP_WAIT_POLICY"]
        else:
            os.environ["OMP_WAIT_POLICY"] = before


def wait_policy() -> str:
    """The OpenMP wait policy the CPU target's kernels (and torch's operators) run with here."""
    return _POLICY


def thread_count() -> int:
    """Threads for a kernel's blocks: torch's intra-op count, at most the CPUs we may use."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        import torch
        want = torch.get_num_threads()
    except ImportError:
        want = int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or cpus
    return max(1, min(want, cpus))


def configure(lib: ctypes.CDLL) -> None:
    """Give a loaded kernel library its thread count, and a thread-level kernel its spin limit when
    TILECRAFT_CPU_SPIN_SECONDS sets one (tilecraft_cpu_threads.h; default 8 s)."""
    try:
        ctypes.c_int.in_dll(lib, "tc_num_threads").value = thread_count()
    except ValueError:
        pass  # a library built before the symbol existed
    from .. import env
    spin = env.cpu_spin_seconds()
    if spin is not None:
        try:
            ctypes.c_double.in_dll(lib, "tc_simt_spin_seconds").value = spin
        except ValueError:
            pass  # not a thread-level kernel

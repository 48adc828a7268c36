"""OpenMP for the CPU target's kernels: a passive wait policy and a bounded thread count.

Kernels run their blocks on the system libgomp's threads.  Its default wait policy spins at every
barrier; on a shared machine a spinning thread takes the core its sibling needs, and a kernel
that takes 1 ms alone took tens of ms under load (issue 22).  So libgomp is loaded once, before
the first kernel, with ``OMP_WAIT_POLICY=PASSIVE`` (unless the user set a policy or a spin count
themselves): waiting threads sleep.  The variable is set only while libgomp reads it, so nothing
else (torch's own OpenMP, subprocesses) sees it.

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


def load_openmp() -> None:
    """Load the system libgomp with a passive wait policy (once per process)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        ctypes.CDLL(ctypes.util.find_library("gomp") or "libgomp.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass  # a compiler with another OpenMP runtime: its defaults apply
    finally:
        del os.environ["OMP_WAIT_POLICY"]


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

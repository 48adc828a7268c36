"""NVRTC precompiled headers (CUDA 12.8+): the device library is parsed once per header prefix and process.

Every generated kernel begins with the same few directives (``#define TC_NO_WGMMA`` or the wgmma
shapes it issues, then ``#include "tilecraft/tilecraft.h"``).  Parsing them is 0.04-0.07 s of a
0.07-0.4 s NVRTC compile (this machine, NVRTC 13.5: a softmax 0.11 -> 0.07 s).  So a process's first
compile of a prefix writes NVRTC's precompiled header for it (``--create-pch``), and its later compiles
with the same prefix and options load it (``--use-pch``).  NVRTC gives the same cubin byte for byte
either way (tests/cuda/test_nvrtc_pch.py).

Per process, not on disk for others: an NVRTC precompiled header holds addresses of the NVRTC
instance that wrote it (its "PCH heap"); another process's NVRTC refuses it (warning 20282) and parses
the headers anyway, after reading the file.  So the files live in a folder of this process,
``<cache dir>/nvrtc-pch/<pid>-*``, removed at exit (and a dead process's by the next one to make its
folder; a forked child, whose NVRTC is the same instance, reads its parent's files and writes its own),
the :data:`MAX_FILES` most recently used kept, ~14 MB each.  The key is the directive
prefix (up to the first line of code) and every NVRTC option (architecture, include folders, fast
math, user flags).

Rules, each so that a precompiled header can only make a compile faster:
- a source whose prefix does not include ``tilecraft/tilecraft.h`` (hand-written CUDA) compiles as given;
- NVRTC's note ("creating/using precompiled header file ...") is taken out of the log; a compile in
  which NVRTC did not use the header (a bad file: it warns and parses the headers) or that fails
  with it is compiled again without it, so the log and any error are those of the plain compile;
  the file is then dropped (a key whose header could not be written is not tried again);
- ``TILECRAFT_NVRTC_PCH=0`` turns it off.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Optional, Sequence, Tuple

from .. import env
from .errors import CudaCompileError

MAX_FILES = 6    # precompiled headers a process keeps (the most recently used)
_HEADER = "tilecraft/tilecraft.h"


def directive_prefix(source: str) -> str | None:
    """The preprocessing directives before the first line of code (comments and blank lines skipped,
    trailing comments dropped), one per line; None when they do not include the device library or are
    of a kind this reading does not follow (a continued line, a block comment)."""
    lines = []
    for raw in source.splitlines():
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        if line.startswith("/*") or line.endswith("\\"):
            return None
        if not line.startswith("#"):
            break
        lines.append(line.split("//", 1)[0].rstrip())
    text = "\n".join(lines)
    return text if _HEADER in text else None


def enabled() -> bool:
    """NVRTC 12.8 or newer, and ``TILECRAFT_NVRTC_PCH`` not off."""
    if not env.knobs.nvrtc_pch:
        return False
    from .nvrtc import nvrtc_version
    try:
        return nvrtc_version() >= (12, 8)
    except CudaCompileError:
        return False


class _Store:
    """This process's precompiled headers: key -> file, most recently used last."""

    def __init__(self):
        self.lock = threading.Lock()
        self.files: OrderedDict[str, Path] = OrderedDict()
        self.busy: set[str] = set()   # keys a thread is writing now
        self.failed: set[str] = set()  # keys whose header NVRTC did not write: not tried again
        self.folder: Path | None = None
        self.owner = 0                # the pid that made the folder (a forked child does not remove it)

    def folder_for_writing(self) -> Path:
        if self.folder is None or self.owner != os.getpid():
            root = Path(env.cache_dir()) / "nvrtc-pch"
            root.mkdir(parents=True, exist_ok=True)
            _remove_orphans(root)
            self.folder = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root))
            self.owner = os.getpid()
            self.files.clear()   # a forked child writes its own files into its own folder
            atexit.register(_remove_folder, self.folder, self.owner)
        return self.folder


def _remove_folder(folder: Path, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


def _remove_orphans(root: Path) -> None:
    """The folders of processes that ended without removing theirs (killed, os._exit)."""
    for folder in root.iterdir():
        pid = folder.name.split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:   # alive under another user, or unknowable: left alone
            pass


_STORE = _Store()


def _after_fork_in_child() -> None:
    """A forked child gets a fresh lock (another thread may have held the parent's at the fork) and
    keeps its parent's files, which its NVRTC (the same instance) can read."""
    _STORE.lock = threading.Lock()
    _STORE.busy = set()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def key_of(source: str, options: Sequence[str]) -> str | None:
    """The precompiled header this source and these options would use (None: none is used)."""
    prefix = directive_prefix(source)
    if prefix is None or not enabled():
        return None
    return hashlib.sha256("\0".join([prefix, *options]).encode()).hexdigest()[:32]


_NOTE_RE = re.compile(r'^"[^"]*": (creating|using) precompiled header file "[^"]*"\n?', re.M)

Result = Tuple[Optional[bytes], str, Optional[str]]   # cubin, log, ptx (nvrtc._run_nvrtc)


def _with_header(run: Callable[[list], Result], options: list, flag: str, verb: str) -> Result | None:
    """The compile with `flag`, its log without NVRTC's note, or None when NVRTC did not `verb` the header."""
    cubin, log, ptx = run(options + [flag])
    notes = [m.group(1) for m in _NOTE_RE.finditer(log)]
    if notes != [verb]:
        return None
    return cubin, _NOTE_RE.sub("", log, count=1), ptx


def compile_with_pch(run: Callable[[list], Result], source: str, options: Sequence[str]) -> Result:
    """``run(options)`` -- one NVRTC compile of ``source`` -- with the prefix's precompiled header
    loaded, or written by this compile when this process has none yet (see the module's rules)."""
    options = list(options)
    key = key_of(source, options)
    if key is None:
        return run(options)
    store = _STORE
    with store.lock:
        path = store.files.get(key)
        plain = path is None and (key in store.busy or key in store.failed)
        if path is not None:
            store.files.move_to_end(key)
        elif not plain:
            try:
                target = store.folder_for_writing() / f"{key}.pch"
                store.busy.add(key)
            except OSError:
                plain = True
    if plain:
        return run(options)
    if path is not None:
        return _use(run, options, key, path)
    try:
        try:
            result = _with_header(run, options, f"--create-pch={target}", "creating")
        except CudaCompileError:   # the program's own error, as the plain compile reports it
            target.unlink(missing_ok=True)
            return run(options)
        if result is None or not target.is_file():   # compiled, but NVRTC wrote no header (its heap, say)
            with store.lock:
                store.failed.add(key)
            target.unlink(missing_ok=True)
            return run(options)   # and its log without NVRTC's warning
        with store.lock:
            store.files[key] = target
            while len(store.files) > MAX_FILES:
                _, old = store.files.popitem(last=False)
                old.unlink(missing_ok=True)
        return result
    finally:
        with store.lock:
            store.busy.discard(key)


def _use(run: Callable[[list], Result], options: list, key: str, path: Path) -> Result:
    try:
        result = _with_header(run, options, f"--use-pch={path}", "using")
    except CudaCompileError:
        result = None
    if result is not None:
        return result
    result = run(options)   # raises the program's own error; returning means the header was at fault
    with _STORE.lock:
        if _STORE.files.get(key) == path:
            del _STORE.files[key]
    path.unlink(missing_ok=True)
    return result

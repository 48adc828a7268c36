"""A content-addressed, process-safe disk cache for compiled artifacts.

Layout: ``<cache_dir>/<namespace>/<key[:2]>/<key>/`` holds one entry: the artifact files (IR
text, .cpp/.cu source, .so/.cubin, ...) and ``meta.json`` recording the caller's metadata and
the sha256 of every artifact. Why each piece:

- Keys are sha256 digests of a canonical encoding of everything that determines the output
  (``cache_key``), including ``compiler_version_hash()`` so a change to the compiler's own source
  never serves a stale kernel.
- An entry is written into a temporary directory beside its final place and published with one
  ``os.replace``, so a reader sees either nothing or a complete entry. Writers of one key
  serialize on a ``filelock.FileLock``; once published an entry never changes (the first writer
  wins), so readers take no lock and a loaded ``.so`` is never overwritten under a process.
- A corrupt or partial entry (unreadable json, checksum mismatch, missing file) is a miss: it is
  removed and the caller rebuilds. A cache problem never reaches the user as an exception; a
  cache directory that cannot be written degrades to a private temporary entry.
- Sharing (``shared_cache.py``): with ``TILECRAFT_CACHE_KEY`` set, every entry's meta.json is signed
  (HMAC) and an entry is verified before it is loaded (unsigned, foreign or damaged: refused with a
  warning, removed, rebuilt); ``TILECRAFT_CACHE_URL`` puts a Redis behind this cache, or a shared
  directory in place of its root.

In-memory caching of loaded kernels is the jit layer's job, not this module's.
"""

from __future__ import annotations

import atexit
import dataclasses
import enum
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path, PurePath
from typing import Any, Mapping

from filelock import FileLock

from .. import env
from . import shared_cache
from .shared_cache import cache_stats, reset_cache_stats

__all__ = ["cache_key", "compiler_version_hash", "toolchain_key", "kernel_cache_key", "DiskCache", "CacheEntry",
           "cache_info", "clear_cache", "cache_stats", "reset_cache_stats"]

log = logging.getLogger("tilecraft.cache")

META = "meta.json"
FORMAT = 1
_KEY_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
_HEADER_SUFFIXES = {".h", ".hpp", ".cuh", ".inl", ".hh"}


# ----------------------------------------------------------------------------------- keys


def _encode(value: Any, out: list[bytes]) -> None:
    """Append an unambiguous, type-tagged encoding of ``value`` (length-prefixed where needed)."""
    if value is None:
        out.append(b"N")
    elif isinstance(value, bool):  # before int: True must not equal 1
        out.append(b"T" if value else b"F")
    elif isinstance(value, enum.Enum):
        out.append(b"E")
        _encode(f"{type(value).__module__}.{type(value).__qualname__}", out)
        _encode(value.value, out)
    elif isinstance(value, int):
        out.append(b"i%d;" % value)
    elif isinstance(value, float):
        out.append(b"f" + value.hex().encode() + b";")
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        out.append(b"s%d:" % len(data) + data)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        out.append(b"b%d:" % len(data) + data)
    elif isinstance(value, (tuple, list)):
        out.append(b"(%d:" % len(value) if isinstance(value, tuple) else b"[%d:" % len(value))
        for item in value:
            _encode(item, out)
    elif isinstance(value, (set, frozenset)):
        items = sorted(cache_key(v) for v in value)
        out.append(b"{%d:" % len(items) + "".join(items).encode())
    elif isinstance(value, Mapping):
        pairs = sorted(((cache_key(k), k, v) for k, v in value.items()), key=lambda t: t[0])
        out.append(b"d%d:" % len(pairs))
        for _, k, v in pairs:
            _encode(k, out)
            _encode(v, out)
    elif isinstance(value, PurePath):
        _encode(("path", str(value)), out)
    elif hasattr(value, "__cache_key__"):
        out.append(b"K")
        _encode(f"{type(value).__module__}.{type(value).__qualname__}", out)
        _encode(value.__cache_key__(), out)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(b"D")
        _encode(f"{type(value).__module__}.{type(value).__qualname__}", out)
        _encode({f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, out)
    elif _torch_kind(value) is not None:
        _encode(("torch", _torch_kind(value), str(value)), out)
    else:
        raise TypeError(
            f"cache_key: cannot key a value of type {type(value).__qualname__} ({value!r:.80}); "
            "use str/int/float/bool/None/bytes, tuples, lists, dicts, enums, dataclasses, "
            "or give the type a __cache_key__() method")


def _torch_kind(value) -> str | None:
    """"dtype" or "device" for a torch.dtype / torch.device (torch is not imported for this: such a
    value exists only once it is), else None."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if isinstance(value, torch.dtype):
        return "dtype"
    if isinstance(value, torch.device):
        return "device"
    return None


def cache_key(*parts: Any) -> str:
    """The sha256 hex digest of a canonical encoding of ``parts``.

    Types are tagged, so ``1``, ``1.0``, ``True`` and ``"1"`` give different keys, and dict order
    does not matter. Anything whose ``repr`` could hide an address (arbitrary objects) is refused
    with ``TypeError`` rather than silently producing a key that never hits or, worse, collides.
    """
    out: list[bytes] = []
    _encode(parts, out)
    return hashlib.sha256(b"".join(out)).hexdigest()


def package_root() -> Path:
    """The ``tilecraft/`` package directory."""
    return Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def compiler_version_hash() -> str:
    """sha256 over the path and content of every .py and header file of the package.

    Computed once per process. Any edit to the compiler (a pass, the code generator, a device
    header) changes it, which changes every cache key that includes it.
    """
    root = package_root()
    digest = hashlib.sha256()
    files = sorted(
        p for p in root.rglob("*")
        if p.is_file() and (p.suffix == ".py" or p.suffix in _HEADER_SUFFIXES)
        and "__pycache__" not in p.parts)
    for path in files:
        rel = path.relative_to(root).as_posix().encode()
        data = path.read_bytes()
        digest.update(b"%d:" % len(rel) + rel + b"%d:" % len(data))
        digest.update(data)
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def _tool_version(path: str) -> str:
    """The output of ``<tool> --version`` (one subprocess per tool and process; it names the
    release and build); the path alone when the tool cannot be run (the build then reports it)."""
    import subprocess
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return f"unavailable:{path}"
    return (proc.stdout + proc.stderr).strip()


@functools.lru_cache(maxsize=None)
def host_cpu() -> str:
    """The host CPU's model name and feature flags (/proc/cpuinfo), else the platform's words."""
    import platform
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().split("\n\n")[0].splitlines()
        keep = [ln for ln in lines if ln.split(":")[0].strip() in ("model name", "flags", "Features", "CPU part")]
        if keep:
            return "\n".join(" ".join(ln.split()) for ln in keep)
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def toolchain_key(target) -> tuple:
    """Which compiler turns this target's source into a binary, and its version.

    CPU: the C++ compiler (``env.cxx()``), its ``--version`` line and the host CPU (kernels are built
    with ``-march=native``: a cache shared between machines must not serve one's vector code to
    another, :func:`host_cpu`).  CUDA: ``TILECRAFT_CUDA_COMPILER``
    (``nvrtc``: the loaded library's (major, minor); ``nvcc``: its path and ``--version`` text).
    Part of every kernel key, so switching compiler or upgrading it compiles again instead of
    serving the other compiler's binary.
    """
    if getattr(target, "kind", None) != "cuda":
        cxx = env.cxx()
        return ("cxx", cxx, _tool_version(cxx), host_cpu())
    compiler = env.cuda_compiler()
    if compiler == "nvcc":
        from .nvcc import find_nvcc
        path = find_nvcc() or "nvcc"
        return ("nvcc", path, _tool_version(path))
    from .errors import CudaCompileError
    from .nvrtc import nvrtc_version
    try:
        return ("nvrtc", nvrtc_version())
    except CudaCompileError:
        return ("nvrtc", "unavailable")  # the compile itself reports the missing library


def kernel_cache_key(ir_text: str, target, configs: Mapping[str, Any]) -> str:
    """The disk-cache key of one kernel: the program text, the target, the pass configs (the dict
    as passed, over TILECRAFT_PASS_CONFIGS), the compiler and its version (:func:`toolchain_key`),
    the device header sources (:func:`tilecraft.device.fingerprint`) and tilecraft's own source
    (:func:`compiler_version_hash`, which also covers the headers shipped in the package)."""
    from ..device import fingerprint
    return cache_key("kernel", ir_text, str(target), sorted(configs.items()), toolchain_key(target),
                     fingerprint(), compiler_version_hash())


# ----------------------------------------------------------------------------------- entries


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class CacheEntry:
    """One published (or temporary) entry: a directory of artifacts plus metadata."""

    def __init__(self, path: Path, key: str, meta: dict, artifacts: dict[str, dict]):
        self.path = path
        self.key = key
        self.meta = meta
        self._artifacts = artifacts

    @property
    def artifacts(self) -> list[str]:
        """Names of the stored artifacts."""
        return sorted(self._artifacts)

    def __contains__(self, name: str) -> bool:
        return name in self._artifacts

    def file(self, name: str) -> Path:
        """A real filesystem path of artifact ``name`` (loadable with ctypes / dlopen)."""
        if name not in self._artifacts:
            raise KeyError(f"cache entry {self.key[:12]} has no artifact {name!r} (has {self.artifacts})")
        return self.path / name

    def read(self, name: str) -> bytes:
        return self.file(name).read_bytes()

    def read_text(self, name: str) -> str:
        return self.read(name).decode("utf-8")

    def __repr__(self) -> str:
        return f"CacheEntry({self.key[:12]}, {self.path}, artifacts={self.artifacts})"


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name) or name == META:
        raise ValueError(f"invalid artifact name {name!r}: use a plain file name other than {META!r}")


def _check_key(key: str) -> None:
    if not isinstance(key, str) or not _KEY_RE.match(key):
        raise ValueError(f"invalid cache key {key!r}: use cache_key(...) to make one")


_temp_dirs: list[str] = []


@atexit.register
def _remove_temp_dirs() -> None:
    for d in _temp_dirs:
        shutil.rmtree(d, ignore_errors=True)


def _new_doc(namespace: str, blobs: dict[str, bytes], key: str, meta: dict) -> dict:
    """meta.json of a new entry: the artifacts' checksums and the caller's metadata, signed when a
    signing key is set."""
    record = {name: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)} for name, data in blobs.items()}
    doc = {"format": FORMAT, "key": key, "created": time.time(), "artifacts": record, "meta": meta}
    signing_key = shared_cache.signing_key()
    return shared_cache.sign(namespace, doc, signing_key) if signing_key is not None else doc


def _write_files(directory: Path, blobs: dict[str, bytes], doc: dict) -> dict:
    """Write artifacts and then meta.json (last, so a missing meta marks a partial write)."""
    for name, data in blobs.items():
        with open(directory / name, "wb") as f:
            f.write(data)
    (directory / META).write_text(json.dumps(doc, indent=1, sort_keys=True))
    return doc


def _check_doc(namespace: str, key: str, doc: Any) -> str | None:
    """Why meta.json ``doc`` does not describe a usable entry ``key`` (its files not yet looked at)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != key:
        return "damaged (meta.json of another format or key)"
    if not isinstance(doc.get("artifacts"), dict):
        return "damaged (meta.json lists no artifacts)"
    signing_key = shared_cache.signing_key()
    return shared_cache.verify(namespace, doc, signing_key) if signing_key is not None else None


class DiskCache:
    """The entries of one namespace (e.g. ``"kernels"``, ``"autotune"``) under ``env.cache_dir()``.

    The root directory is looked up on every call, so changing ``TILECRAFT_CACHE_DIR`` takes
    effect at once.
    """

    def __init__(self, namespace: str):
        _check_key(namespace)
        self.namespace = namespace
        self._refused_remote: set[str] = set()  # keys whose remote entry was refused: a rebuild replaces it

    def _entry_dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def _lock(self, key: str) -> FileLock:
        return FileLock(str(self.root / key[:2] / f"{key}.lock"))

    @property
    def root(self) -> Path:
        return (shared_cache.shared_directory() or env.cache_dir()) / self.namespace

    def _load(self, key: str) -> CacheEntry | None:
        """The entry if it is complete, every checksum matches and (with a signing key) it is signed
        with that key, else None (no side effects)."""
        return self._check(key)[0]

    def _check(self, key: str) -> tuple[CacheEntry | None, str | None]:
        """(the entry, None) or (None, why it is refused: ``"trust: ..."`` for a signature problem)."""
        path = self._entry_dir(key)
        try:
            doc = json.loads((path / META).read_text())
            why = _check_doc(self.namespace, key, doc)
            if why is not None:
                return None, why
            artifacts = doc["artifacts"]
            for name, info in artifacts.items():
                _check_name(name)
                file = path / name
                if file.stat().st_size != info["size"] or _sha256_file(file) != info["sha256"]:
                    return None, f"damaged (artifact {name} does not match its checksum)"
            return CacheEntry(path, key, doc.get("meta", {}), artifacts), None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            return None, f"damaged ({type(exc).__name__})"

    def _remove(self, key: str) -> None:
        """Move a bad entry aside (atomic) and delete it; called with the key's lock held."""
        path = self._entry_dir(key)
        if not path.exists():
            return
        trash = path.with_name(f".trash-{key}-{os.getpid()}-{time.monotonic_ns()}")
        try:
            os.replace(path, trash)
        except OSError:
            trash = path
        shutil.rmtree(trash, ignore_errors=True)

    def get(self, key: str) -> CacheEntry | None:
        """The entry stored under ``key``, or None. A damaged entry is removed and reported as a miss."""
        _check_key(key)
        if env.cache_disabled():
            return None
        if not self._entry_dir(key).exists():
            entry = self._get_remote(key)
            shared_cache.count(self.namespace, "remote_hit" if entry is not None else "miss")
            return entry
        entry = self._load(key)
        if entry is not None:
            shared_cache.count(self.namespace, "hit")
            return entry
        try:
            with self._lock(key):
                entry, why = self._check(key)  # a concurrent writer may have just repaired it
                if entry is None:
                    if shared_cache.signing_key() is not None:
                        shared_cache.refuse(self.namespace, key, "local", why or "damaged")
                    else:
                        log.warning("tilecraft cache: removing damaged entry %s/%s (%s)", self.namespace, key, why)
                    self._remove(key)
        except OSError:
            entry = None
        shared_cache.count(self.namespace, "hit" if entry is not None else "miss")
        return entry

    def _get_remote(self, key: str) -> CacheEntry | None:
        """The entry from the remote store, verified and published locally; None on a miss, on a
        refused entry (with a warning; the rebuild replaces it) or when the store cannot be reached."""
        store = shared_cache.remote_store()
        if store is None:
            return None
        try:
            files = store.get(self.namespace, key)
        except Exception as exc:  # noqa: BLE001 - a network problem is a miss, never an error
            shared_cache.remote_failed(self.namespace, "be read", exc)
            return None
        if files is None:
            return None
        try:
            doc = json.loads(files.pop(META).decode("utf-8"))
            why = _check_doc(self.namespace, key, doc)
            if why is None:
                listed = doc["artifacts"]
                if set(listed) != set(files):
                    why = "damaged (its artifacts are not the ones meta.json lists)"
                for name, data in files.items():
                    _check_name(name)
                    if why is None and hashlib.sha256(data).hexdigest() != listed[name].get("sha256"):
                        why = f"damaged (artifact {name} does not match its checksum)"
        except (KeyError, ValueError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            why = f"damaged ({type(exc).__name__})"
        if why is not None:
            if not why.startswith("foreign"):  # another team's entry is theirs: first writer wins
                self._refused_remote.add(key)
            shared_cache.refuse(self.namespace, key, "shared", why)
            return None
        try:
            return self._publish(key, files, doc)
        except OSError as exc:
            log.warning("tilecraft cache: cannot write to %s (%s); the shared entry is not used", self.root, exc)
            return None

    def put(self, key: str, artifacts: Mapping[str, bytes | str], meta: Mapping[str, Any] | None = None) -> CacheEntry:
        """Store ``artifacts`` (name -> bytes or text) and JSON-able ``meta`` under ``key``.

        If a valid entry already exists (another process got there first) it is returned as is.
        With the cache disabled, or when the cache directory cannot be written, the artifacts go
        to a private temporary directory (removed at exit) and that entry is returned.
        """
        _check_key(key)
        blobs = {}
        for name, data in artifacts.items():
            _check_name(name)
            blobs[name] = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        meta = dict(meta or {})
        json.dumps(meta)  # fail early (TypeError) on metadata that cannot be stored
        doc = _new_doc(self.namespace, blobs, key, meta)
        if not env.cache_disabled():
            try:
                entry = self._publish(key, blobs, doc)
            except OSError as exc:
                log.warning("tilecraft cache: cannot write to %s (%s); using a temporary entry", self.root, exc)
            else:
                shared_cache.count(self.namespace, "store")
                self._put_remote(key, blobs, doc)
                return entry
        tmp = Path(tempfile.mkdtemp(prefix=f"tilecraft-{self.namespace}-"))
        _temp_dirs.append(str(tmp))
        _write_files(tmp, blobs, doc)
        return CacheEntry(tmp, key, meta, doc["artifacts"])

    def _put_remote(self, key: str, blobs: dict[str, bytes], doc: dict) -> None:
        store = shared_cache.remote_store()
        if store is None or "signature" not in doc:
            return
        files = {META: json.dumps(doc, indent=1, sort_keys=True).encode(), **blobs}
        try:
            if store.put(self.namespace, key, files, replace=key in self._refused_remote):
                shared_cache.count(self.namespace, "remote_store")
            self._refused_remote.discard(key)
        except Exception as exc:  # noqa: BLE001 - never lose a build to the network
            shared_cache.remote_failed(self.namespace, "be written", exc)

    def _publish(self, key: str, blobs: dict[str, bytes], doc: dict) -> CacheEntry:
        parent = self.root / key[:2]
        parent.mkdir(parents=True, exist_ok=True)
        with self._lock(key):
            existing = self._load(key)
            if existing is not None:
                return existing
            self._remove(key)  # a damaged leftover would block os.replace
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=parent))
            try:
                _write_files(tmp, blobs, doc)
                os.replace(tmp, self._entry_dir(key))
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        entry = self._load(key)
        if entry is None:
            raise OSError(f"entry {key} vanished right after it was written")
        return entry

    def remove(self, key: str) -> None:
        """Delete the entry stored under ``key`` if there is one."""
        _check_key(key)
        if self._entry_dir(key).exists():
            with self._lock(key):
                self._remove(key)

    def keys(self) -> list[str]:
        """Keys of the published entries (complete or not)."""
        root = self.root
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.glob("*/*") if p.is_dir() and not p.name.startswith("."))


# ----------------------------------------------------------------------------------- whole cache


def _entry_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return [p.parent for p in root.glob(f"*/*/*/{META}") if not p.parent.name.startswith(".")]


def cache_info(namespace: str | None = None) -> dict[str, Any]:
    """Number of entries and bytes on disk, overall and per namespace."""
    root = shared_cache.shared_directory() or env.cache_dir()
    per_ns: dict[str, dict[str, int]] = {}
    for entry in _entry_dirs(root):
        ns = entry.parent.parent.name
        if namespace is not None and ns != namespace:
            continue
        stats = per_ns.setdefault(ns, {"entries": 0, "bytes": 0})
        stats["entries"] += 1
        stats["bytes"] += sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
    return {
        "path": str(root if namespace is None else root / namespace),
        "entries": sum(s["entries"] for s in per_ns.values()),
        "bytes": sum(s["bytes"] for s in per_ns.values()),
        "namespaces": per_ns,
        "disabled": env.cache_disabled(),
    }


def clear_cache(namespace: str | None = None) -> None:
    """Remove every entry (of one namespace, or all of them)."""
    root = shared_cache.shared_directory() or env.cache_dir()
    target = root if namespace is None else root / namespace
    if namespace is not None:
        _check_key(namespace)
    if not target.is_dir():
        return
    for child in list(target.iterdir()):
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            try:
                child.unlink()
            except OSError:
                pass

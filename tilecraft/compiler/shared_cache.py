"""The shared side of the compile cache: signed entries, and a remote store behind the disk cache.

A shared cache is code that runs on your machine: a compiled ``.so`` or cubin that another machine
put there is loaded into your process. So once a team shares one, every entry carries an
HMAC-SHA256 of its ``meta.json`` (which lists the sha256 of every artifact) under a key the team
sets (``TILECRAFT_CACHE_KEY``), and an entry is verified before anything of it is loaded:

- signed with this key, checksums right: loaded;
- unsigned, signed with another key ("foreign"), or damaged (a signature or checksum that does not
  match): refused with a :class:`CacheTrustWarning` naming the entry and why, removed, and rebuilt
  (the rebuilt entry, signed with this key, replaces it locally, and in the remote store unless the
  refused one was foreign: another key's entry stays, first writer wins).

Where the shared cache is (``TILECRAFT_CACHE_URL``):

- ``redis://host:port/db`` (``rediss://`` for TLS), through redis-py: a second tier behind the
  local disk cache. A local miss asks Redis; a verified remote entry is published into the local
  cache (its files must be real files to be loaded) and used from there; a fresh build is published
  locally and then written to Redis (one hash per entry, written in one command, first writer wins).
  A Redis that cannot be reached costs a warning and the local cache goes on alone.
- ``file:///path`` or a plain path: a shared directory (e.g. NFS) used as the disk cache's root, as
  ``TILECRAFT_CACHE_DIR`` does, with the same signing.

``TILECRAFT_CACHE_URL`` without ``TILECRAFT_CACHE_KEY`` is refused with a warning (once per
process) and the local cache is used alone: unsigned entries are never shared. The key alone signs
and checks the local cache too (a directory shared through ``TILECRAFT_CACHE_DIR``).

The counters of :func:`cache_stats` (local hits, remote hits, misses, stores, refusals per
namespace) tell a process whether it compiled anything.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import threading
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlparse

from .. import env
from ..errors import CacheTrustWarning

__all__ = ["CacheTrustWarning", "RemoteStore", "RedisStore", "cache_stats", "reset_cache_stats",
           "remote_store", "shared_directory", "sign", "signing_key", "verify", "count"]

log = logging.getLogger("tilecraft.cache")

SIGNATURE = "signature"
ALGORITHM = "hmac-sha256"

# ----------------------------------------------------------------------------------- counters

_stats: dict[str, Counter] = {}
_stats_lock = threading.Lock()


def count(namespace: str, event: str, n: int = 1) -> None:
    """Count one cache event: ``hit`` (local), ``remote_hit``, ``miss``, ``store``, ``refused``,
    ``remote_store``, ``remote_error``."""
    with _stats_lock:
        _stats.setdefault(namespace, Counter())[event] += n


def cache_stats(namespace: str | None = None) -> dict:
    """This process's cache events, per namespace (or of one namespace)."""
    with _stats_lock:
        if namespace is not None:
            return dict(_stats.get(namespace, Counter()))
        return {ns: dict(c) for ns, c in _stats.items()}


def reset_cache_stats() -> None:
    with _stats_lock:
        _stats.clear()


# ----------------------------------------------------------------------------------- signing


def signing_key() -> bytes | None:
    """The team's key (``TILECRAFT_CACHE_KEY``), or None: entries are then neither signed nor checked."""
    return env.cache_signing_key()


def _key_id(key: bytes) -> str:
    """Names the key an entry was signed with (a digest: the key itself never leaves the process)."""
    return hashlib.sha256(b"tilecraft-cache-key-id\0" + key).hexdigest()[:16]


def _signed_bytes(namespace: str, doc: dict) -> bytes:
    body = {k: v for k, v in doc.items() if k != SIGNATURE}
    return namespace.encode() + b"\0" + json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def sign(namespace: str, doc: dict, key: bytes) -> dict:
    """``doc`` (an entry's meta.json) with its signature added."""
    mac = hmac.new(key, _signed_bytes(namespace, doc), hashlib.sha256).hexdigest()
    return {**doc, SIGNATURE: {"alg": ALGORITHM, "key_id": _key_id(key), "mac": mac}}


def verify(namespace: str, doc: dict, key: bytes) -> str | None:
    """None when ``doc`` is signed with ``key`` and unchanged since, else why it is refused."""
    sig = doc.get(SIGNATURE)
    if not isinstance(sig, dict):
        return "unsigned (TILECRAFT_CACHE_KEY is set and the entry carries no signature)"
    if sig.get("alg") != ALGORITHM:
        return f"signed with an unknown algorithm {sig.get('alg')!r}"
    if sig.get("key_id") != _key_id(key):
        return "foreign (signed with another TILECRAFT_CACHE_KEY)"
    want = hmac.new(key, _signed_bytes(namespace, doc), hashlib.sha256).hexdigest()
    if not isinstance(sig.get("mac"), str) or not hmac.compare_digest(want, sig["mac"]):
        return "damaged (its signature does not match its contents: altered after it was signed)"
    return None


def refuse(namespace: str, key: str, where: str, reason: str) -> None:
    """Warn that an entry was refused (it is rebuilt, never loaded)."""
    count(namespace, "refused")
    warnings.warn(f"tilecraft cache: refused {where} entry {namespace}/{key[:16]}: {reason}; "
                  "it is not loaded and is rebuilt", CacheTrustWarning, stacklevel=4)


# ----------------------------------------------------------------------------------- where


@dataclass(frozen=True)
class CacheUrl:
    scheme: str  # "redis", "rediss" or "file"
    url: str
    path: Path | None = None


def _parse_url(raw: str) -> CacheUrl:
    parsed = urlparse(raw)
    if parsed.scheme in ("redis", "rediss", "unix"):
        return CacheUrl(parsed.scheme, raw)
    if parsed.scheme == "file":
        return CacheUrl("file", raw, Path(unquote(parsed.path)))
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and raw[1:2] == ":"):  # a path (or C:\...)
        return CacheUrl("file", raw, Path(raw).expanduser())
    raise ValueError(f"TILECRAFT_CACHE_URL={raw!r}: expected redis://host:port/db, rediss://..., "
                     "file:///path or a directory path")


_warned: set[str] = set()


def _warn_once(tag: str, message: str) -> None:
    if tag not in _warned:
        _warned.add(tag)
        warnings.warn(message, CacheTrustWarning, stacklevel=4)


def _shared_url() -> CacheUrl | None:
    """The shared cache in force: None without a URL, or (with a warning) without a key."""
    raw = env.cache_url()
    if not raw:
        return None
    url = _parse_url(raw)
    if signing_key() is None:
        _warn_once(f"nokey:{raw}", f"tilecraft cache: TILECRAFT_CACHE_URL={raw} is set but TILECRAFT_CACHE_KEY is "
                   "not: the shared cache is not used (its entries would be unsigned, and unsigned entries are "
                   "code nobody vouches for); set TILECRAFT_CACHE_KEY to the team's key")
        return None
    return url


def shared_directory() -> Path | None:
    """The shared directory that replaces the disk cache's root, if ``TILECRAFT_CACHE_URL`` names one."""
    url = _shared_url()
    return url.path if url is not None and url.scheme == "file" else None


class RemoteStore(Protocol):
    """Where entries live beyond this machine: whole entries (``meta.json`` and the artifacts) by key."""

    def get(self, namespace: str, key: str) -> dict[str, bytes] | None: ...

    def put(self, namespace: str, key: str, files: dict[str, bytes], replace: bool = False) -> bool: ...


class RedisStore:
    """Entries as Redis hashes ``tilecraft:v1:<namespace>:<key>``: field ``meta.json`` and one field
    per artifact, written in one HSET (inside a transaction that checks the entry is absent, unless
    it replaces a refused one), read with one HGETALL."""

    PREFIX = "tilecraft:v1"

    def __init__(self, url: str):
        import redis  # the `scale` extra: pip install 'tilecraft[scale]'

        self.url = url
        self.client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=30)

    def _name(self, namespace: str, key: str) -> str:
        return f"{self.PREFIX}:{namespace}:{key}"

    def get(self, namespace: str, key: str) -> dict[str, bytes] | None:
        fields = self.client.hgetall(self._name(namespace, key))
        if not fields:
            return None
        return {(k.decode("utf-8", "replace") if isinstance(k, bytes) else k): bytes(v) for k, v in fields.items()}

    def put(self, namespace: str, key: str, files: dict[str, bytes], replace: bool = False) -> bool:
        name = self._name(namespace, key)
        if replace:
            with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(name)
                pipe.hset(name, mapping=files)
                pipe.execute()
            return True
        # first writer wins: one Lua script (atomic in Redis) checks the entry is absent and writes it
        script = ("if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end "
                  "redis.call('HSET', KEYS[1], unpack(ARGV)) return 1")
        args: list[bytes | str] = []
        for field, data in files.items():
            args += [field, data]
        return bool(self.client.eval(script, 1, name, *args))


@functools.lru_cache(maxsize=8)
def _store_for(url: str) -> RemoteStore:
    return RedisStore(url)


def remote_store() -> RemoteStore | None:
    """The remote store ``TILECRAFT_CACHE_URL`` names (a Redis), or None."""
    url = _shared_url()
    if url is None or url.scheme == "file":
        return None
    try:
        return _store_for(url.url)
    except ImportError:
        _warn_once(f"noredis:{url.url}", f"tilecraft cache: TILECRAFT_CACHE_URL={url.url} needs the redis package "
                   "(pip install 'tilecraft[scale]'); the local cache is used alone")
        return None


def remote_failed(namespace: str, what: str, exc: BaseException) -> None:
    """A remote store that cannot be reached costs a warning (once per process and error kind)."""
    count(namespace, "remote_error")
    _warn_once(f"remote:{type(exc).__name__}", f"tilecraft cache: the shared cache could not {what} "
               f"({type(exc).__name__}: {exc}); going on with the local cache")

"""The shared compile cache (compiler/shared_cache.py): signed entries, refused when unsigned,
foreign or damaged, and a real Redis behind the disk cache shared by two processes.

The Redis tests start a private `redis-server` on a free port in a temporary directory (the `redis`
marker: scripts/ensure_redis.sh installs the binary where it can; otherwise they skip with why).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from fresh_python import run_python  # tests/: a fresh process without paying `import torch`

from tilecraft.compiler.cache import DiskCache, cache_key, cache_stats, reset_cache_stats
from tilecraft.compiler.shared_cache import RedisStore
from tilecraft.errors import CacheTrustWarning

KEY = "team-secret-0123456789abcdef"


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("TILECRAFT_CACHE_URL", "TILECRAFT_CACHE_KEY", "TILELANG_CACHE_URL", "TILELANG_CACHE_KEY"):
        monkeypatch.delenv(name, raising=False)
    reset_cache_stats()
    return tmp_path


def _refusals(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, CacheTrustWarning)]


def test_entries_are_signed_and_checked_with_the_key(cache_env, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_KEY", KEY)
    cache = DiskCache("kernels")
    key = cache_key("signed")
    cache.put(key, {"kernel.so": b"\x7fELF-good"}, {"binary_name": "kernel.so"})
    doc = json.loads((cache.root / key[:2] / key / "meta.json").read_text())
    assert doc["signature"]["alg"] == "hmac-sha256" and len(doc["signature"]["mac"]) == 64
    assert KEY not in json.dumps(doc)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheTrustWarning)
        assert cache.get(key).read("kernel.so") == b"\x7fELF-good"
    assert cache_stats("kernels") == {"store": 1, "hit": 1}


def test_a_tampered_entry_is_refused_removed_and_rebuilt(cache_env, monkeypatch):
    """An attacker who can write the shared directory replaces the binary and fixes the checksum:
    the signature no longer matches, so nothing of it is loaded."""
    monkeypatch.setenv("TILECRAFT_CACHE_KEY", KEY)
    cache = DiskCache("kernels")
    key = cache_key("tampered")
    cache.put(key, {"kernel.so": b"good"}, {})
    entry_dir = cache.root / key[:2] / key
    (entry_dir / "kernel.so").write_bytes(b"evil")
    doc = json.loads((entry_dir / "meta.json").read_text())
    import hashlib
    doc["artifacts"]["kernel.so"] = {"sha256": hashlib.sha256(b"evil").hexdigest(), "size": 4}
    (entry_dir / "meta.json").write_text(json.dumps(doc))
    with pytest.warns(CacheTrustWarning, match=r"refused local entry kernels/.*damaged .*signature does not match"):
        assert cache.get(key) is None
    assert not entry_dir.exists(), "the refused entry is removed"
    assert cache.put(key, {"kernel.so": b"good"}, {}).read("kernel.so") == b"good"  # the rebuild
    assert cache.get(key).read("kernel.so") == b"good"
    assert cache_stats("kernels")["refused"] == 1


def test_unsigned_and_foreign_entries_are_refused(cache_env, monkeypatch):
    cache = DiskCache("kernels")
    unsigned, foreign = cache_key("unsigned"), cache_key("foreign")
    cache.put(unsigned, {"a": b"1"}, {})               # written before the team set a key
    monkeypatch.setenv("TILECRAFT_CACHE_KEY", "another team's key")
    cache.put(foreign, {"a": b"2"}, {})
    monkeypatch.setenv("TILECRAFT_CACHE_KEY", KEY)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert cache.get(unsigned) is None
        assert cache.get(foreign) is None
    messages = _refusals(record)
    assert len(messages) == 2
    assert "unsigned" in messages[0] and "foreign (signed with another TILECRAFT_CACHE_KEY)" in messages[1]


def test_without_a_key_the_cache_works_as_before(cache_env):
    cache = DiskCache("kernels")
    key = cache_key("plain")
    cache.put(key, {"a": b"1"}, {})
    doc = json.loads((cache.root / key[:2] / key / "meta.json").read_text())
    assert "signature" not in doc
    assert cache.get(key).read("a") == b"1"


def test_a_url_without_a_key_is_refused_with_a_warning(cache_env, monkeypatch):
    shared = cache_env / "shared"
    monkeypatch.setenv("TILECRAFT_CACHE_URL", f"file://{shared}")
    from tilecraft.compiler import shared_cache
    shared_cache._warned.clear()
    with pytest.warns(CacheTrustWarning, match="TILECRAFT_CACHE_KEY is not: the shared cache is not used"):
        entry = DiskCache("kernels").put(cache_key("x"), {"a": b"1"}, {})
    assert not shared.exists(), "nothing unsigned is written to the shared directory"
    assert Path(entry.path).is_relative_to(cache_env / "cache")


def test_a_shared_directory_url_is_the_cache_root(cache_env, monkeypatch):
    shared = cache_env / "shared"
    monkeypatch.setenv("TILECRAFT_CACHE_URL", str(shared))
    monkeypatch.setenv("TILECRAFT_CACHE_KEY", KEY)
    entry = DiskCache("kernels").put(cache_key("y"), {"a": b"1"}, {})
    assert Path(entry.path).is_relative_to(shared / "kernels")


def test_a_bad_url_is_a_clear_error(cache_env, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_URL", "http://example/cache")
    monkeypatch.setenv("TILECRAFT_CACHE_KEY", KEY)
    with pytest.raises(ValueError, match="TILECRAFT_CACHE_URL='http://example/cache': expected redis://"):
        DiskCache("kernels").put(cache_key("z"), {"a": b"1"}, {})


# ----------------------------------------------------------------------------------- a real Redis


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_url(tmp_path):
    binary = os.environ.get("TILECRAFT_TEST_REDIS_SERVER", "redis-server")
    port = _free_port()
    data = tmp_path / "redis"
    data.mkdir()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
                             "--save", "", "--appendonly", "no", "--protected-mode", "yes"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if proc.poll() is not None:
                pytest.fail(f"redis-server exited with {proc.returncode}")
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("redis-server did not answer within 10 s")
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


# One process of the team: compiles the README GEMM (small) on the CPU target through the shared
# cache, runs it on fixed inputs and prints the cache counters and a digest of the output.
WORKER = r"""
import hashlib, json, sys, warnings
import torch
from tilecraft.compiler.cache import cache_stats
from tilecraft.kernels.gemm import matmul
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as record:
    kernel = matmul(64, 48, 32, block_M=32, block_N=16, block_K=16, num_stages=1)
g = torch.Generator().manual_seed(0)
a = torch.randn(64, 32, generator=g).half(); b = torch.randn(32, 48, generator=g).half()
c = kernel(a, b)
assert torch.allclose(c.float(), (a.float() @ b.float()), atol=1e-1, rtol=1e-2)
print(json.dumps({"stats": cache_stats("kernels"), "digest": hashlib.sha256(c.numpy().tobytes()).hexdigest(),
                  "warnings": [str(w.message) for w in record]}))
"""


def _run_worker(tmp_path: Path, name: str, url: str, key: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TILECRAFT_CACHE", "TILELANG_CACHE"))}
    env.update(TILECRAFT_CACHE_DIR=str(tmp_path / name), TILECRAFT_CACHE_URL=url)
    if key is not None:
        env["TILECRAFT_CACHE_KEY"] = key
    proc = run_python([sys.executable, "-c", WORKER], env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.cxx
@pytest.mark.redis
def test_two_processes_share_one_redis_cache(tmp_path, redis_url):
    first = _run_worker(tmp_path, "host1", redis_url, KEY)
    assert first["stats"].get("miss", 0) >= 1 and first["stats"].get("remote_store", 0) == first["stats"]["miss"]
    second = _run_worker(tmp_path, "host2", redis_url, KEY)  # another machine: an empty local cache
    assert second["stats"].get("miss", 0) == 0, f"the second process compiled something: {second['stats']}"
    assert second["stats"]["remote_hit"] == first["stats"]["miss"]
    assert second["digest"] == first["digest"]
    assert not second["warnings"]

    # someone alters the shared binary (and its checksum): refused, rebuilt, and the rebuild replaces it
    import redis
    client = redis.Redis.from_url(redis_url)
    names = [n.decode() for n in client.keys("tilecraft:v1:kernels:*")]
    assert names
    import hashlib
    for name in names:
        doc = json.loads(client.hget(name, "meta.json"))
        doc["artifacts"]["kernel.so"]["sha256"] = hashlib.sha256(b"evil").hexdigest()
        client.hset(name, mapping={"kernel.so": b"evil", "meta.json": json.dumps(doc)})
    third = _run_worker(tmp_path, "host3", redis_url, KEY)
    assert third["stats"].get("remote_hit", 0) == 0 and third["stats"]["miss"] == first["stats"]["miss"]
    assert any("refused shared entry kernels/" in w and "signature does not match" in w for w in third["warnings"])
    assert third["digest"] == first["digest"]
    fourth = _run_worker(tmp_path, "host4", redis_url, KEY)  # the rebuild replaced the bad entry
    assert fourth["stats"].get("miss", 0) == 0 and not fourth["warnings"]

    # the wrong key: every shared entry is foreign, refused and rebuilt; never loaded
    wrong = _run_worker(tmp_path, "host5", redis_url, "not the team's key")
    assert wrong["stats"].get("remote_hit", 0) == 0 and wrong["stats"]["miss"] == first["stats"]["miss"]
    assert any("foreign (signed with another TILECRAFT_CACHE_KEY)" in w for w in wrong["warnings"])
    team = _run_worker(tmp_path, "host6", redis_url, KEY)  # the wrong key did not replace the team's entries
    assert team["stats"].get("miss", 0) == 0 and not team["warnings"]

    # no key: a clear warning, the shared cache is not touched
    nokey = _run_worker(tmp_path, "host7", redis_url, None)
    assert nokey["stats"].get("remote_hit", 0) == 0 and nokey["stats"]["miss"] == first["stats"]["miss"]
    assert any("TILECRAFT_CACHE_KEY is not" in w for w in nokey["warnings"])


@pytest.mark.redis
def test_redis_store_first_writer_wins_and_replace(redis_url):
    store = RedisStore(redis_url)
    assert store.get("kernels", "k1") is None
    assert store.put("kernels", "k1", {"meta.json": b"{}", "a": b"1"})
    assert not store.put("kernels", "k1", {"meta.json": b"{}", "a": b"2"}), "the first writer wins"
    assert store.get("kernels", "k1") == {"meta.json": b"{}", "a": b"1"}
    assert store.put("kernels", "k1", {"meta.json": b"{}", "b": b"3"}, replace=True)
    assert store.get("kernels", "k1") == {"meta.json": b"{}", "b": b"3"}


@pytest.mark.redis
def test_an_unreachable_redis_costs_a_warning_not_the_build(cache_env, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_URL", f"redis://127.0.0.1:{_free_port()}/0")
    monkeypatch.setenv("TILECRAFT_CACHE_KEY", KEY)
    from tilecraft.compiler import shared_cache
    shared_cache._warned.clear()
    cache = DiskCache("kernels")
    key = cache_key("offline")
    with pytest.warns(CacheTrustWarning, match="the shared cache could not be read"):
        assert cache.get(key) is None
    entry = cache.put(key, {"a": b"1"}, {})
    assert entry.read("a") == b"1" and cache.get(key).read("a") == b"1"
    assert cache_stats("kernels")["remote_error"] == 2


def test_the_key_is_never_printed(cache_env, monkeypatch):
    from tilecraft import env
    monkeypatch.setenv("TILECRAFT_CACHE_KEY", KEY)
    text = env.describe()
    assert KEY not in text and "TILECRAFT_CACHE_KEY" in text and "<set>" in text

"""The content-addressed disk cache: keys, hits and misses, damaged entries, concurrency, knobs."""

import ctypes
import json
import multiprocessing as mp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tilecraft import env
from tilecraft.compiler import cache as cache_mod
from tilecraft.compiler.cache import DiskCache, cache_info, cache_key, clear_cache, compiler_version_hash


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    for name in ("TILECRAFT_DISABLE_CACHE", "TILELANG_DISABLE_CACHE", "TILELANG_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ------------------------------------------------------------------------------------ keys


def test_cache_key_is_canonical_and_type_tagged():
    assert cache_key({"a": 1, "b": [1, 2]}) == cache_key({"b": [1, 2], "a": 1})
    distinct = [1, 1.0, True, "1", b"1", None, (1,), [1], {1: 1}, {1}, 0, False, "", ()]
    assert len({cache_key(v) for v in distinct}) == len(distinct)
    assert cache_key("a", "bc") != cache_key("ab", "c")
    assert cache_key(("a", "b")) != cache_key("a", "b")
    assert cache_key(0.1) != cache_key(0.1 + 1e-17 * 2**4)
    assert len(cache_key()) == 64


def test_cache_key_refuses_objects_without_a_stable_encoding():
    class Opaque:
        pass

    with pytest.raises(TypeError, match="Opaque"):
        cache_key({"x": Opaque()})

    class Keyed:
        def __init__(self, v):
            self.v = v

        def __cache_key__(self):
            return ("keyed", self.v)

    assert cache_key(Keyed(1)) == cache_key(Keyed(1)) != cache_key(Keyed(2))


def test_cache_key_accepts_torch_dtypes_enums_dataclasses():
    import dataclasses
    import enum

    import torch

    class Color(enum.Enum):
        RED = 1

    @dataclasses.dataclass(frozen=True)
    class Target:
        kind: str
        arch: str | None = None

    assert cache_key(torch.float16) != cache_key(torch.bfloat16)
    # torch values are keyed by what they are (isinstance), as ("torch", kind, text): the keys of caches
    # written before stay valid
    assert cache_key(torch.float16) == cache_key(("torch", "dtype", "torch.float16"))
    assert cache_key(torch.device("cuda", 1)) == cache_key(("torch", "device", "cuda:1"))
    impostor = type("dtype", (), {"__module__": "torch"})()   # a name alone is not a torch dtype
    with pytest.raises(TypeError, match="cannot key a value of type dtype"):
        cache_key(impostor)
    assert cache_key(Color.RED) != cache_key(1)
    assert cache_key(Target("cuda", "sm_90a")) == cache_key(Target("cuda", "sm_90a"))
    assert cache_key(Target("cuda", "sm_90a")) != cache_key(Target("cuda", "sm_80"))


def test_compiler_version_hash_tracks_sources(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "prims.h").write_text("// v1\n")
    monkeypatch.setattr(cache_mod, "package_root", lambda: pkg)

    def fresh():
        compiler_version_hash.cache_clear()
        return compiler_version_hash()

    try:
        h1 = fresh()
        assert fresh() == h1
        (pkg / "__pycache__").mkdir()
        (pkg / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"junk")
        (pkg / "notes.txt").write_text("not source")
        assert fresh() == h1, "bytecode and non-source files must not change the hash"
        (pkg / "sub" / "prims.h").write_text("// v2\n")
        h2 = fresh()
        assert h2 != h1, "a header edit must invalidate"
        (pkg / "a.py").write_text("x = 2\n")
        h3 = fresh()
        assert h3 not in (h1, h2)
        (pkg / "a.py").rename(pkg / "b.py")
        assert fresh() != h3, "renaming a file must invalidate"
    finally:
        compiler_version_hash.cache_clear()


def test_version_hash_change_is_a_miss(monkeypatch):
    cache = DiskCache("kernels")
    key_v1 = cache_key("prog", 128, "v1-hash")
    cache.put(key_v1, {"lib.so": b"old"}, {})
    monkeypatch.setattr(cache_mod, "compiler_version_hash", lambda: "v2-hash")
    assert cache.get(cache_key("prog", 128, cache_mod.compiler_version_hash())) is None
    assert cache.get(key_v1).read("lib.so") == b"old"


def test_real_version_hash_covers_this_package():
    compiler_version_hash.cache_clear()
    h = compiler_version_hash()
    assert len(h) == 64 and h == compiler_version_hash()


# ------------------------------------------------------------------------------------ hits and misses


def test_miss_then_hit(cache_dir):
    cache = DiskCache("kernels")
    key = cache_key("matmul", 1024, "cpu")
    assert cache.get(key) is None
    entry = cache.put(key, {"kernel.cpp": "int f();", "lib.so": b"\x7fELF\x00\x01"}, {"name": "matmul"})
    assert entry.read("lib.so") == b"\x7fELF\x00\x01"
    assert entry.file("kernel.cpp").read_text() == "int f();"
    assert entry.path.is_relative_to(cache_dir)

    hit = cache.get(key)
    assert hit is not None and hit.meta == {"name": "matmul"}
    assert hit.artifacts == ["kernel.cpp", "lib.so"]
    assert hit.read("kernel.cpp") == b"int f();"
    with pytest.raises(KeyError):
        hit.file("missing.bin")
    assert DiskCache("other").get(key) is None, "namespaces are separate"


def test_first_writer_wins(cache_dir):
    cache = DiskCache("kernels")
    key = cache_key("k")
    cache.put(key, {"a": b"first"}, {"n": 1})
    again = cache.put(key, {"a": b"second"}, {"n": 2})
    assert again.read("a") == b"first" and again.meta == {"n": 1}


def test_bad_names_and_meta_are_refused():
    cache = DiskCache("kernels")
    with pytest.raises(ValueError):
        cache.get("../escape")
    with pytest.raises(ValueError):
        cache.put(cache_key(1), {"../x": b""}, {})
    with pytest.raises(ValueError):
        cache.put(cache_key(1), {"meta.json": b""}, {})
    with pytest.raises(TypeError):
        cache.put(cache_key(1), {"a": b""}, {"obj": object()})


def test_shared_library_loads_from_the_entry_path(tmp_path):
    cxx = shutil.which(env.cxx()) or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "k.cpp"
    src.write_text('extern "C" int answer() { return 42; }\n')
    so = tmp_path / "k.so"
    subprocess.run([cxx, "-shared", "-fPIC", "-O0", str(src), "-o", str(so)], check=True)
    cache = DiskCache("kernels")
    key = cache_key("answer")
    cache.put(key, {"lib.so": so.read_bytes()}, {})
    lib = ctypes.CDLL(str(cache.get(key).file("lib.so")))
    assert lib.answer() == 42


# ------------------------------------------------------------------------------------ damage


def _damage_json(entry):
    (entry.path / "meta.json").write_text("{not json")


def _damage_checksum(entry):
    (entry.path / "lib.so").write_bytes(b"tampered")


def _damage_same_size(entry):
    (entry.path / "lib.so").write_bytes(b"XXXXXXXX")


def _damage_missing_file(entry):
    (entry.path / "lib.so").unlink()


def _damage_missing_meta(entry):
    (entry.path / "meta.json").unlink()


def _damage_wrong_key(entry):
    doc = json.loads((entry.path / "meta.json").read_text())
    doc["key"] = "0" * 64
    (entry.path / "meta.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("damage", [_damage_json, _damage_checksum, _damage_same_size, _damage_missing_file,
                                    _damage_missing_meta, _damage_wrong_key])
def test_damaged_entry_is_a_miss_and_is_rebuilt(damage):
    cache = DiskCache("kernels")
    key = cache_key("victim")
    entry = cache.put(key, {"lib.so": b"original", "src.cpp": "code"}, {"v": 1})
    damage(entry)
    assert cache.get(key) is None
    assert not entry.path.exists(), "a damaged entry is removed"
    rebuilt = cache.put(key, {"lib.so": b"rebuilt", "src.cpp": "code"}, {"v": 2})
    assert cache.get(key).read("lib.so") == b"rebuilt"
    assert rebuilt.meta == {"v": 2}


def test_put_over_a_damaged_leftover(cache_dir):
    cache = DiskCache("kernels")
    key = cache_key("leftover")
    stale = cache_dir / "kernels" / key[:2] / key
    stale.mkdir(parents=True)
    (stale / "junk").write_text("partial write")
    entry = cache.put(key, {"lib.so": b"fresh"}, {})
    assert entry.read("lib.so") == b"fresh"
    assert not (entry.path / "junk").exists()


# ------------------------------------------------------------------------------------ knobs


@pytest.mark.parametrize("var", ["TILECRAFT_DISABLE_CACHE", "TILELANG_DISABLE_CACHE"])
def test_disable_knob(monkeypatch, cache_dir, var):
    cache = DiskCache("kernels")
    key = cache_key("x")
    cache.put(key, {"a": b"stored before"}, {})
    monkeypatch.setenv(var, "1")
    assert env.cache_disabled()
    assert cache.get(key) is None, "a disabled cache always misses"
    entry = cache.put(cache_key("y"), {"lib.so": b"temp"}, {"m": 1})
    assert entry.read("lib.so") == b"temp" and entry.meta == {"m": 1}
    assert not entry.path.is_relative_to(cache_dir), "nothing is stored when disabled"
    monkeypatch.setenv(var, "0")
    assert cache.get(cache_key("y")) is None


def test_cache_dir_knob_and_alias(monkeypatch, tmp_path):
    monkeypatch.delenv("TILECRAFT_CACHE_DIR")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "tl"))
    assert env.cache_dir() == tmp_path / "tl"
    entry = DiskCache("kernels").put(cache_key("alias"), {"a": b"1"}, {})
    assert entry.path.is_relative_to(tmp_path / "tl")
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "tc"))
    assert env.cache_dir() == tmp_path / "tc", "the TILECRAFT_ spelling wins"


def test_unwritable_cache_dir_degrades_to_a_temporary_entry(monkeypatch, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(blocker))
    entry = DiskCache("kernels").put(cache_key("z"), {"lib.so": b"ok"}, {})
    assert entry.read("lib.so") == b"ok"


def test_cache_info_and_clear(cache_dir):
    DiskCache("kernels").put(cache_key(1), {"a": b"12345"}, {})
    DiskCache("kernels").put(cache_key(2), {"a": b"123"}, {})
    DiskCache("autotune").put(cache_key(3), {"r.json": "{}"}, {})
    info = cache_info()
    assert info["entries"] == 3 and info["path"] == str(cache_dir)
    assert info["namespaces"]["kernels"]["entries"] == 2
    assert info["bytes"] >= 5 + 3 + 2
    assert cache_info("autotune")["entries"] == 1
    clear_cache("autotune")
    assert cache_info()["entries"] == 2
    clear_cache()
    assert cache_info()["entries"] == 0
    assert DiskCache("kernels").get(cache_key(1)) is None


# ------------------------------------------------------------------------------------ concurrency

N_PROCS = 4
SHARED_KEYS = 6


def _writer(proc: int, barrier, queue) -> None:
    """Each process writes the shared keys (racing the others) and its own keys, then reads back."""
    try:
        cache = DiskCache("kernels")
        barrier.wait()
        seen = {}
        for i in range(SHARED_KEYS):
            key = cache_key("shared", i)
            payload = f"proc{proc}-key{i}".encode() * 2000
            entry = cache.get(key) or cache.put(key, {"lib.so": payload, "src.cpp": f"// {i}"}, {"by": proc})
            seen[i] = entry.read("lib.so")
            own = cache_key("own", proc, i)
            cache.put(own, {"lib.so": payload}, {"by": proc})
        for i in range(SHARED_KEYS):  # what we saw must still be what is stored
            assert cache.get(cache_key("shared", i)).read("lib.so") == seen[i]
            assert cache.get(cache_key("own", proc, i)).read("lib.so") == f"proc{proc}-key{i}".encode() * 2000
        queue.put((proc, {i: v[:12] for i, v in seen.items()}, None))
    except BaseException as exc:  # report, never hang the parent
        queue.put((proc, None, repr(exc)))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_concurrent_writers_from_several_processes(cache_dir):
    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    barrier = ctx.Barrier(N_PROCS)
    queue = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(p, barrier, queue)) for p in range(N_PROCS)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    errors = [err for _, _, err in results if err]
    assert not errors, errors
    views = [seen for _, seen, _ in results]
    assert all(v == views[0] for v in views), "every process must see the same (first) writer's entry"
    info = cache_info("kernels")
    assert info["entries"] == SHARED_KEYS + N_PROCS * SHARED_KEYS
    leftovers = [p for p in (cache_dir / "kernels").glob("*/*") if p.name.startswith((".tmp", ".trash"))]
    assert not leftovers
    cache = DiskCache("kernels")
    for i in range(SHARED_KEYS):
        entry = cache.get(cache_key("shared", i))
        assert entry.read("src.cpp") == f"// {i}".encode()
        assert entry.read("lib.so") == f"proc{entry.meta['by']}-key{i}".encode() * 2000

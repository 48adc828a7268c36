"""Environment knobs: names, TileLang aliases, parsing, defaults, Python overrides."""

from pathlib import Path

import pytest

from tilecraft import env

ALL_VARS = [n for k in env.all_knobs() for n in k.names]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ALL_VARS:
        monkeypatch.delenv(name, raising=False)
    yield
    env._overrides.clear()


def test_defaults():
    assert env.cache_dir() == Path.home() / ".cache" / "tilecraft"
    assert env.cache_disabled() is False and env.autotune_cache_disabled() is False
    assert env.cuda_compiler() == "nvrtc"
    assert env.print_on_compilation() is False and env.verbose() is False
    assert env.cxx()  # found on PATH, or the "g++" fallback
    assert 1 <= env.autotune_max_workers()


def test_read_at_call_time_with_alias_and_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "a"))
    assert env.cache_dir() == tmp_path / "a"
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", "~/tc")
    assert env.cache_dir() == Path.home() / "tc", "TILECRAFT_ wins and ~ is expanded"
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "true")
    assert env.cache_disabled() and env.autotune_cache_disabled()
    monkeypatch.setenv("TILECRAFT_DISABLE_CACHE", "0")
    assert not env.cache_disabled()
    monkeypatch.setenv("TILELANG_AUTO_TUNING_DISABLE_CACHE", "on")
    assert env.autotune_cache_disabled()
    monkeypatch.setenv("TILECRAFT_CXX", "/opt/clang++")
    monkeypatch.setenv("CXX", "/usr/bin/other")
    assert env.cxx() == "/opt/clang++"
    monkeypatch.delenv("TILECRAFT_CXX")
    assert env.cxx() == "/usr/bin/other", "the conventional CXX is honoured"
    monkeypatch.setenv("TILECRAFT_VERBOSE", "1")
    assert env.print_on_compilation()


def test_bad_values_name_the_variable(monkeypatch):
    monkeypatch.setenv("TILECRAFT_CUDA_COMPILER", "clang")
    with pytest.raises(ValueError, match="TILECRAFT_CUDA_COMPILER"):
        env.cuda_compiler()
    monkeypatch.setenv("TILECRAFT_CUDA_COMPILER", "NVCC")
    assert env.cuda_compiler() == "nvcc"
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "maybe")
    with pytest.raises(ValueError, match="TILELANG_DISABLE_CACHE"):
        env.cache_disabled()
    monkeypatch.setenv("TILECRAFT_AUTO_TUNING_MAX_CPU_COUNT", "lots")
    with pytest.raises(ValueError, match="integer"):
        env.autotune_max_workers()


def test_worker_cap(monkeypatch):
    import os

    monkeypatch.setenv("TILECRAFT_AUTO_TUNING_MAX_CPU_COUNT", "1")
    assert env.autotune_max_workers() == 1
    monkeypatch.setenv("TILELANG_AUTO_TUNING_MAX_CPU_COUNT", "100000")
    monkeypatch.delenv("TILECRAFT_AUTO_TUNING_MAX_CPU_COUNT")
    assert env.autotune_max_workers() == (os.cpu_count() or 1), "capped by the CPU count"


def test_python_overrides(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECRAFT_DISABLE_CACHE", "1")
    env.enable_cache()
    assert env.is_cache_enabled(), "an override wins over the environment"
    env.disable_cache()
    assert env.cache_disabled()
    env.set_knob("disable_cache", None)
    assert env.cache_disabled(), "None hands the knob back to the environment"
    with env.override(cache_dir=str(tmp_path), cuda_compiler="nvcc"):
        assert env.cache_dir() == tmp_path and env.cuda_compiler() == "nvcc"
        assert env.snapshot()["cache_dir"] == tmp_path
        assert "(override)" in env.describe()
    assert env.cache_dir() != tmp_path and env.cuda_compiler() == "nvrtc"
    with pytest.raises(KeyError):
        env.set_knob("no_such_knob", 1)
    with pytest.raises(ValueError):
        env.set_knob("cuda_compiler", "gcc")

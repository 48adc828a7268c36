"""Tuning many shapes at once (autotuner/sweep.py, `tilecraft tune`) and the tuning database
(autotuner/database.py): a second sweep benchmarks nothing it knows; the table and plot are written."""

import sqlite3

import pytest
import torch
from tuning_fakes import FakeJit

from tilecraft.autotuner import TuningDatabase, tune_many
from tilecraft.autotuner.sweep import expand_space
from tilecraft.cli import main

FAST = dict(warmup=1, rep=8)


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    for name in ("TILECRAFT_DISABLE_CACHE", "TILECRAFT_AUTO_TUNING_DISABLE_CACHE", "TILECRAFT_AUTOTUNE_EXECUTOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILECRAFT_TUNING_DB", str(tmp_path / "tuning.sqlite"))
    monkeypatch.setenv("TILECRAFT_AUTO_TUNING_MAX_CPU_COUNT", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def matmul(M, N, K, chunk=1):
    if chunk <= 0:
        raise ValueError(f"chunk must be positive, got {chunk}")
    return dict(M=M, N=N, K=K, chunk=chunk, bug=False, launch_fail=False)


def test_expand_space():
    assert expand_space({"a": [1, 2], "b": [3]}) == [{"a": 1, "b": 3}, {"a": 2, "b": 3}]
    assert expand_space([{"a": 1}]) == [{"a": 1}]
    with pytest.raises(ValueError, match="at least one value"):
        expand_space({"a": []})


def test_a_second_sweep_benchmarks_nothing_and_writes_table_and_plot(tmp_path):
    factory = FakeJit(matmul)
    shapes = [(128, 32, 32), (64, 32, 32)]
    space = {"chunk": [1, 0, 16]}
    first = tune_many(factory, shapes, space, ref_prog=lambda a, b: a @ b, **FAST)
    assert first.measured == 6 and first.known == 0
    assert [r.all_results[1].status for r in first.results] == ["compile error"] * 2
    second = tune_many(factory, shapes, space, ref_prog=lambda a, b: a @ b, **FAST)
    assert second.measured == 0 and second.known == 6
    assert [b[1] for b in second.best()] == [b[1] for b in first.best()]
    assert all(r.from_cache for r in second.results)
    table = second.table(show=False)
    assert "benchmarked 0, 6 known from the tuning database" in table and "128, 32, 32 (ms)" in table
    assert table.count("*") == 2  # one best per shape
    png = second.plot(str(tmp_path / "sweep.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    # a new config in the space: only it is benchmarked, once per shape
    third = tune_many(factory, shapes, {"chunk": [1, 0, 16, 8]}, ref_prog=lambda a, b: a @ b, **FAST)
    assert third.measured == 2 and third.known == 6
    summary = TuningDatabase().summary()
    assert len(summary) == 2 and all(p["configs"] == 4 and p["best_ms"] > 0 for p in summary)


def test_the_database_keeps_what_a_rerun_would_repeat(tmp_path):

    def kernel(M, N, K, chunk=1):
        return dict(M=M, N=N, K=K, chunk=chunk, bug=chunk == 2, launch_fail=chunk == 3)

    factory = FakeJit(kernel)
    report = tune_many(factory, [(64, 32, 32)], {"chunk": [1, 2, 3]}, ref_prog=lambda a, b: a @ b, **FAST)
    assert [r.status for r in report.results[0].all_results] == ["ok", "mismatch", "launch error"]
    with sqlite3.connect(str(tmp_path / "tuning.sqlite")) as conn:
        stored = sorted(s for (s,) in conn.execute("SELECT status FROM results"))
    assert stored == ["mismatch", "ok"], "a launch error is tried again next time"


def test_tune_command(tmp_path, capsys, monkeypatch):
    module = tmp_path / "fake_kernels.py"
    module.write_text("from tuning_fakes import FakeJit\n\n"
                      "def matmul(M, N, K, chunk=1):\n"
                      "    return dict(M=M, N=N, K=K, chunk=chunk, bug=False, launch_fail=False)\n\n"
                      "matmul = FakeJit(matmul)\n\n"
                      "def reference(a, b):\n    return a @ b\n")
    out = tmp_path / "out"
    argv = ["tune", f"{module}:matmul", "--shapes", "128,32,32", "M=64,N=32,K=32", "--space", "chunk=1,16",
            "--ref", f"{module}:reference", "--warmup", "1", "--rep", "8", "--out", str(out),
            "--db", str(tmp_path / "tuning.sqlite")]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert "benchmarked 4, 0 known" in first and "M=64, N=32, K=32 (ms)" in first
    assert (out / "tune_matmul.md").read_text().startswith("tune matmul: 2 configs x 2 shapes")
    assert (out / "tune_matmul.png").read_bytes()[:4] == b"\x89PNG"
    assert main(argv) == 0
    assert "benchmarked 0, 4 known from the tuning database" in capsys.readouterr().out


def test_tune_command_mistakes(tmp_path, capsys):
    assert main(["tune", "tilecraft.kernels.gemm:matmul", "--shapes", "64,64,64", "--space", "block_M"]) == 2
    assert "--space 'block_M': expected NAME=V1,V2" in capsys.readouterr().err
    assert main(["tune", "tilecraft.kernels.gemm:nothing", "--shapes", "64", "--space", "a=1"]) == 2
    assert "has no 'nothing'" in capsys.readouterr().err

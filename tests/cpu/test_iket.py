"""`tilelang.tools.cuda.iket` (language/iket.py, runtime/iket.py): marks and ranges recorded by CPU
kernels, written as trace files whose counts follow the launches and blocks; the result unchanged."""
from __future__ import annotations

import json

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.errors import TilecraftError
from tilecraft.tools.cuda import iket


def _program(n, threads):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx, iket.range("block_total"):
            iket.mark("block_enter", payload=iket.payload(bx, dtype="int32"))
            for i in T.Parallel(threads):
                idx = bx * threads + i
                if idx < n:
                    iket.mark("store", payload=iket.payload(idx, dtype="int32"))
                    C[idx] = A[idx] * 2.0 + 1.0
            with iket.range("tail"):
                iket.mark("scaled", payload=iket.payload(bx * 0.5, dtype="float32"))
    return main


def test_trace_counts_follow_launches_and_blocks(tmp_path):
    n, threads = 300, 128   # 3 blocks, the last one partial
    with iket.session(output_dir=tmp_path, runtime_payloads=True):
        prog = _program(n, threads)
        table = iket.event_table()
        assert table == {"block_total": 0, "block_enter": 1, "store": 2, "tail": 3, "scaled": 4}
        assert iket.output_dir() == tmp_path.resolve() and iket.runtime_payloads_enabled()
        kernel = tilecraft.compile(prog, out_idx=-1, target="cpu")
    assert iket.trace_files(tmp_path) == []          # nothing ran yet
    a = torch.randn(n)
    for _ in range(2):
        c = kernel(a)
        torch.testing.assert_close(c, a * 2.0 + 1.0)
    files = iket.trace_files(directory=tmp_path)
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["event_table"] == table and len(data["launches"]) == 2
    for launch in data["launches"]:
        by_name = {}
        for m in launch["markers"]:
            by_name.setdefault(m["name"], []).append(m)
        assert sorted(m["payload"] for m in by_name["block_enter"]) == [0, 1, 2]
        assert sorted(m["payload"] for m in by_name["store"]) == list(range(n))     # once per element
        assert all(m["payload"] // threads == m["block"][0] for m in by_name["store"])
        assert sorted(m["payload"] for m in by_name["scaled"]) == [0.0, 0.5, 1.0]
        ranges = launch["ranges"]
        assert sorted((r["name"], r["block"][0]) for r in ranges) == sorted(
            [("block_total", b) for b in range(3)] + [("tail", b) for b in range(3)])
        for r in ranges:
            assert r["end_ns"] >= r["start_ns"] and r["duration_ns"] == r["end_ns"] - r["start_ns"]
        # every mark of a block lies inside its block_total range (monotonic clock)
        total = {r["block"][0]: r for r in ranges if r["name"] == "block_total"}
        for m in launch["markers"]:
            r = total[m["block"][0]]
            assert r["start_ns"] <= m["timestamp_ns"] <= r["end_ns"]


def test_payloads_are_left_out_unless_the_session_captures_them(tmp_path):
    with iket.session(output_dir=tmp_path):
        assert not iket.runtime_payloads_enabled()
        kernel = tilecraft.compile(_program(128, 128), out_idx=-1, target="cpu")
    a = torch.randn(128)
    torch.testing.assert_close(kernel(a), a * 2.0 + 1.0)
    launch = json.loads(iket.trace_files(tmp_path)[0].read_text())["launches"][0]
    assert len(launch["markers"]) == 128 + 2 and all("payload" not in m for m in launch["markers"])
    assert iket.output_path("k.cu", directory=tmp_path) == tmp_path / "k.cu"


def test_mark_needs_a_session():
    with pytest.raises(TilecraftError, match="iket.session"):
        _program(128, 128)


def test_bad_payload_is_an_error_at_the_line(tmp_path):
    with iket.session(output_dir=tmp_path), pytest.raises(TilecraftError, match="payload must be iket.payload"):
        @T.prim_func
        def main(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1) as bx:
                iket.mark("x", payload=bx)


def test_thread_level_program_records_per_thread(tmp_path):
    """A program at the level of CUDA threads (the CPU target emulates them, codegen/cpp_threads.py):
    a mark runs once per thread."""
    n, threads = 64, 32
    with iket.session(output_dir=tmp_path, runtime_payloads=True):
        @T.prim_func
        def main(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
            with T.Kernel(n // threads, threads=threads) as bx:
                tx = T.get_thread_binding()
                v = X[bx * threads + tx]
                iket.mark("lane", payload=iket.payload(tx, dtype="int32"))
                Y[bx * threads + tx] = v + T.shfl_xor(v, 1)
        kernel = tilecraft.compile(main, out_idx=-1, target="cpu")
    assert "threads emulated" in kernel.get_kernel_source()
    x = torch.randn(n)
    y = kernel(x)
    torch.testing.assert_close(y, x + x.view(-1, 2).flip(1).reshape(-1))
    markers = json.loads(iket.trace_files(tmp_path)[0].read_text())["launches"][0]["markers"]
    assert sorted((m["block"][0], m["payload"]) for m in markers) == [(b, t) for b in range(2) for t in range(threads)]

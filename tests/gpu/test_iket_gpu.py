"""`tilelang.tools.cuda.iket` on the GPU (compile-only twin: tests/cuda/test_iket_compile.py): an
instrumented kernel runs, its result matches torch, and its trace holds per-warp events as TileLang's
IKET records them -- one row per executing warp, written by its lowest active lane with that lane's
payload -- in each warp's program order, ranges paired per warp, one launch per call; a log too small
for a launch reports what it dropped; kernels without events are untouched."""
from __future__ import annotations

import collections
import json
import os
import sys

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.runtime import iket as iket_runtime
from tilecraft.tools.cuda import iket

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cuda"))
from test_iket_compile import _own  # noqa: E402

pytestmark = pytest.mark.gpu

N, THREADS = 300, 128        # 3 blocks of 4 warps; the last block has 44 elements: warps 0 (32) and 1 (12)


def _program(n=N, threads=THREADS):
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx, iket.range("block_total"):
            iket.mark("block_enter", payload=iket.payload(bx, dtype="int32"))
            for i in T.Parallel(threads):
                idx = bx * threads + i
                if idx < n:
                    iket.mark("store", payload=iket.payload(idx, dtype="int32"))
                    C[idx] = A[idx] * 2.0 + 1.0
            iket.mark("block_exit")
    return main


def _lanes(block, warp, n=N, threads=THREADS):
    """The lanes of `warp` in `block` whose element exists."""
    first = block * threads + warp * 32
    return max(0, min(32, n - first))


def test_events_per_warp_in_program_order(tmp_path):
    with iket.session(output_dir=tmp_path, runtime_payloads=True):
        kernel = tilecraft.compile(_program(), out_idx=-1, target="cuda")
    assert "TL_IKET_EVENT_PAYLOAD_INT" in kernel.get_kernel_source()
    a = torch.randn(N, device="cuda")
    for _ in range(2):
        torch.testing.assert_close(kernel(a), a * 2.0 + 1.0)
    files = iket.trace_files(tmp_path)
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["target"] == "cuda" and data["granularity"] == "warp" and len(data["launches"]) == 2
    warps = [(b, w) for b in range(3) for w in range(THREADS // 32)]
    for launch in data["launches"]:
        assert launch["dropped"] == 0
        by = collections.defaultdict(list)
        for m in launch["markers"]:
            by[m["name"], m["block"][0], m["warp"]].append(m)
        for b, w in warps:
            # outside the branch every lane runs the mark: the warp records it (lane 0, 32 lanes), payload = block
            for name in ("block_enter", "block_exit"):
                ms = by[name, b, w]
                assert sum(m["active_lanes"] for m in ms) == 32, (name, b, w, ms)
                assert all(m.get("payload", b) == b for m in ms)
            # inside `if idx < n`: each lane that has an element runs it once; each record is written by
            # the lowest lane of those that ran it together, with its own idx
            ms = by["store", b, w]
            assert sum(m["active_lanes"] for m in ms) == _lanes(b, w)
            for m in ms:
                assert m["payload"] == b * THREADS + w * 32 + m["lane"]
            # program order within the warp (clock64 of its SM): enter < store < exit
            enter = min(m["cycles"] for m in by["block_enter", b, w])
            exit_ = max(m["cycles"] for m in by["block_exit", b, w])
            assert all(enter < m["cycles"] < exit_ for m in ms)
            assert all(m["timestamp_ns"] > 0 for m in by["block_enter", b, w])
        ranges = [(r["block"][0], r["warp"]) for r in launch["ranges"]]
        assert sorted(ranges) == warps   # one block_total range per warp
        for r in launch["ranges"]:
            assert r["name"] == "block_total" and r["end_ns"] >= r["start_ns"]
            assert r["duration_ns"] == r["end_ns"] - r["start_ns"] and r["duration_cycles"] > 0
            inside = [m for m in launch["markers"] if (m["block"][0], m["warp"]) == (r["block"][0], r["warp"])]
            assert all(r["start_cycles"] < m["cycles"] < r["end_cycles"] for m in inside)
            assert all(m["sm"] == r["sm"] for m in inside)


def test_float_payloads_and_nested_ranges(tmp_path):
    with iket.session(output_dir=tmp_path, runtime_payloads=True):
        kernel = tilecraft.compile(_own(), out_idx=-1, target="cuda")
    a = torch.randn(300, device="cuda")
    torch.testing.assert_close(kernel(a), a * 2.0)
    launch = json.loads(iket.trace_files(tmp_path)[0].read_text())["launches"][0]
    lanes = collections.Counter()   # (event, payload) -> the lanes that ran it (sum over the warps' records)
    for m in launch["markers"]:
        lanes[m["name"], m["payload"]] += m["active_lanes"]
    assert lanes == {("step", 0.0): 3 * 128, ("step", 0.5): 3 * 128, ("tail", 0): 128, ("tail", 1): 128,
                     ("tail", 2): 128}
    assert all(m["payload"] == m["block"][0] for m in launch["markers"] if m["name"] == "tail")
    names = collections.Counter(r["name"] for r in launch["ranges"])
    assert names == {"outer": 12, "inner": 12}
    outer = {(r["block"][0], r["warp"]): r for r in launch["ranges"] if r["name"] == "outer"}
    for r in launch["ranges"]:
        if r["name"] == "inner":
            o = outer[r["block"][0], r["warp"]]
            assert o["start_cycles"] < r["start_cycles"] <= r["end_cycles"] < o["end_cycles"]


def test_a_full_log_reports_what_it_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(iket_runtime, "MIN_ROWS", 16)
    monkeypatch.setattr(iket_runtime, "MAX_ROWS", 16)
    with iket.session(output_dir=tmp_path, runtime_payloads=True):
        kernel = tilecraft.compile(_program(), out_idx=-1, target="cuda")
    a = torch.randn(N, device="cuda")
    with pytest.warns(RuntimeWarning, match="dropped"):
        torch.testing.assert_close(kernel(a), a * 2.0 + 1.0)
    launch = json.loads(iket.trace_files(tmp_path)[0].read_text())["launches"][0]
    total = 12 * 4 + 10  # rows at least: 12 warps x (begin, enter, exit, end) + 10 warps with elements store
    assert len(launch["markers"]) + 2 * len(launch["ranges"]) <= 16
    assert launch["dropped"] >= total - 16


def test_other_kernels_keep_the_plain_launcher(tmp_path):
    from tilecraft.runtime.cuda_launch import CudaLauncher

    @T.prim_func
    def plain(A: T.Tensor((128,), T.float32), C: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                C[i] = A[i] + 1.0
    k = tilecraft.compile(plain, out_idx=-1, target="cuda")
    assert type(k._launch) is CudaLauncher
    a = torch.randn(128, device="cuda")
    torch.testing.assert_close(k(a), a + 1.0)
    assert iket.trace_files(tmp_path) == []


def test_launches_captured_in_a_cuda_graph_are_left_out(tmp_path):
    """do_bench(backend="cudagraph") captures the call: that launch cannot be waited for, so it runs
    as is (warned once) and the trace keeps only the launches made outside the graph, each whole."""
    from tilecraft.profiler import do_bench
    with iket.session(output_dir=tmp_path):
        kernel = tilecraft.compile(_program(), out_idx=-1, target="cuda")
    a = torch.randn(N, device="cuda")
    torch.testing.assert_close(kernel(a), a * 2.0 + 1.0)
    with pytest.warns(RuntimeWarning, match="CUDA graph"):
        assert do_bench(lambda: kernel(a), warmup=1, rep=2, backend="cudagraph") > 0
    torch.testing.assert_close(kernel(a), a * 2.0 + 1.0)
    launches = json.loads(iket.trace_files(tmp_path)[0].read_text())["launches"]
    assert len(launches) >= 3   # the two calls above and do_bench's warm-up calls outside the capture
    for launch in launches:
        assert launch["dropped"] == 0 and len(launch["ranges"]) == 12
        assert sum(m["active_lanes"] for m in launch["markers"] if m["name"] == "store") == N

"""`tilelang.tools.cuda.iket` on the CUDA target (device/include/tilecraft/iket.h, codegen/cuda.py,
runtime/iket.py): TileLang's three iket examples (examples/iket: minimal, payload_minimal,
all_features; their kernel factories, taken from the files) compile for sm_80 and sm_90a with NVRTC,
each event where the program puts it, payloads only when the session captures them, the event table
in the module; kernels without events are untouched; the host decodes the log's rows (a trace
written from rows laid out as the device writes them).  GPU runs: tests/gpu/test_iket_gpu.py."""
from __future__ import annotations

import ctypes
import importlib.util
import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest

import tilecraft
import tilecraft.compat
import tilecraft.language as T
from tilecraft.errors import TilecraftError
from tilecraft.runtime.iket import IketTrace
from tilecraft.tools.cuda import iket

ARCHS = ["sm_80", "sm_90a"]
ROOT = Path(__file__).resolve().parents[2]


def _corpus() -> Path | None:
    """TileLang's example corpus: ../shared next to this checkout, or next to the main checkout
    when this is a git worktree (its .git file names the main one's)."""
    roots = [ROOT]
    git = ROOT / ".git"
    if git.is_file():
        m = re.match(r"gitdir:\s*(.+)", git.read_text().strip())
        if m:
            roots.append(Path(m.group(1)).resolve().parents[2])   # <main>/.git/worktrees/<name>
    for r in roots:
        d = r.parent / "shared" / "tilelang-examples-head" / "examples" / "iket"
        if d.is_dir():
            return d
    return None


EXAMPLES = {"minimal": "elementwise_add_with_iket", "payload_minimal": "payload_mark_kernel",
            "all_features": "add_scale_with_iket"}


@pytest.fixture
def example():
    """example(name) -> the kernel factory of TileLang's examples/iket/<name>.py (imported with
    `tilelang` answered by tilecraft; its main(), which needs a GPU, is not run)."""
    d = _corpus()
    if d is None:
        pytest.skip("TileLang's example corpus (../shared/tilelang-examples-head) is not here")
    was = tilecraft.compat.installed()
    tilecraft.compat.install()

    def load(name):
        spec = importlib.util.spec_from_file_location(f"tl_iket_{name}", d / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return getattr(mod, EXAMPLES[name]), mod.N
    yield load
    if not was:
        tilecraft.compat.uninstall()


def _compile(factory, n, arch, tmp_path, payloads):
    with iket.session(output_dir=tmp_path, runtime_payloads=payloads):
        prog = factory(n)
        table = iket.event_table()
        kernel = tilecraft.compile(prog, out_idx=-1, target={"kind": "cuda", "arch": arch})
    return kernel, table


def _events(src):
    """The event calls of the kernel body, in order: (macro, kind, event id, payload or None)."""
    body = src[src.index('extern "C"'):]
    return [(m.group(1), int(m.group(2)), int(m.group(3)), m.group(4))
            for m in re.finditer(r"(TL_IKET_EVENT(?:_PAYLOAD_INT|_PAYLOAD_FLOAT)?)\((\d+), (\d+)(?:, ([^;]*))?\);", body)]


def _meta(src):
    lit = re.search(r'__iket_meta_info\[\] = "([^"]*)";', src).group(1)
    return json.loads(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), lit))["events"]


def _statements(src):
    body = src[src.index('extern "C"'):]
    return [ln.strip() for ln in body.splitlines()[1:] if ln.strip()]


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_minimal_example_records_a_kernel_range_and_two_marks(example, arch, tmp_path):
    kernel, table = _compile(*example("minimal"), arch, tmp_path, payloads=False)
    assert table == {"kernel_total": 0, "before_store": 1, "after_store": 2}
    src = kernel.get_kernel_source()
    assert "#define TC_IKET\n" in src and _meta(src) == table
    # TileLang's check (`instrumented=`): its generated source carries both names, as ours does
    assert "__iket_meta_info" in src and "TL_IKET_EVENT" in src
    assert _events(src) == [("TL_IKET_EVENT", 1, 0, None), ("TL_IKET_EVENT", 0, 1, None),
                            ("TL_IKET_EVENT", 0, 2, None), ("TL_IKET_EVENT", 2, 0, None)]
    st = _statements(src)
    # the range opens before the body and closes after it; the marks sit around the store, inside the guard
    first = next(i for i, s in enumerate(st) if "TL_IKET" in s)
    assert st[first] == "TL_IKET_EVENT(1, 0);" and st[-2] == "TL_IKET_EVENT(2, 0);" and st[-1] == "}"
    i = st.index("TL_IKET_EVENT(0, 1);")
    assert st[i - 1].startswith("if (") and st[i + 1].startswith("C[idx] = ") and st[i + 2] == "TL_IKET_EVENT(0, 2);"
    cubin = kernel.artifact.binary
    assert cubin and b"\x00tc_iket_log\x00" in cubin and b"\x00__iket_meta_info\x00" in cubin  # unmangled: the launcher finds them


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("payloads", [False, True])
def test_payload_example_captures_the_index_only_when_asked(example, arch, payloads, tmp_path):
    kernel, table = _compile(*example("payload_minimal"), arch, tmp_path, payloads)
    src = kernel.get_kernel_source()
    assert table == {"store_index": 0} and _meta(src) == table
    want = ("TL_IKET_EVENT_PAYLOAD_INT", 0, 0, "idx") if payloads else ("TL_IKET_EVENT", 0, 0, None)
    assert _events(src) == [want]


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_all_features_example(example, arch, tmp_path):
    kernel, table = _compile(*example("all_features"), arch, tmp_path, payloads=True)
    src = kernel.get_kernel_source()
    assert table == {"block_total": 0, "block_enter": 1, "load_inputs": 2, "store_index": 3, "store_done": 4,
                     "block_exit": 5}
    assert _meta(src) == table
    assert _events(src) == [("TL_IKET_EVENT", 1, 0, None), ("TL_IKET_EVENT_PAYLOAD_INT", 0, 1, "bx"),
                            ("TL_IKET_EVENT", 0, 2, None), ("TL_IKET_EVENT_PAYLOAD_INT", 0, 3, "idx"),
                            ("TL_IKET_EVENT", 0, 4, None), ("TL_IKET_EVENT_PAYLOAD_INT", 0, 5, "bx"),
                            ("TL_IKET_EVENT", 2, 0, None)]


def _own(n=300, threads=128):
    """Float payloads, a nested range, a mark in a serial loop (not from the corpus)."""
    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx, iket.range("outer"):
            for k in T.serial(2):
                iket.mark("step", payload=iket.payload(k * 0.5, dtype="float32"))
            for i in T.Parallel(threads):
                idx = bx * threads + i
                if idx < n:
                    C[idx] = A[idx] * 2.0
            with iket.range("inner"):
                iket.mark("tail", payload=iket.payload(bx, dtype="uint32"))
    return main


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_float_payloads_nested_ranges_and_loops(arch, tmp_path):
    with iket.session(output_dir=tmp_path, runtime_payloads=True):
        kernel = tilecraft.compile(_own(), out_idx=-1, target={"kind": "cuda", "arch": arch})
    ev = [(m, kind, eid) for m, kind, eid, _ in _events(kernel.get_kernel_source())]
    assert ev == [("TL_IKET_EVENT", 1, 0), ("TL_IKET_EVENT_PAYLOAD_FLOAT", 0, 1), ("TL_IKET_EVENT", 1, 2),
                  ("TL_IKET_EVENT_PAYLOAD_INT", 0, 3), ("TL_IKET_EVENT", 2, 2), ("TL_IKET_EVENT", 2, 0)]


@pytest.mark.cuda_compile
def test_kernels_without_events_do_not_carry_the_log(tmp_path):
    @T.prim_func
    def main(A: T.Tensor((128,), T.float32), C: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                C[i] = A[i] + 1.0
    src = tilecraft.compile(main, out_idx=-1, target={"kind": "cuda", "arch": "sm_80"}).get_kernel_source()
    assert "TC_IKET" not in src and "iket" not in src


def _row(eid, kind, block, t, cycles, warp, lane=0, active=32, sm=3, payload=0, vkind=0):
    w0 = eid | (kind << 32) | (vkind << 40)
    w7 = warp | (lane << 16) | (active << 24) | (sm << 32)
    return [w0, *block, t, cycles, payload, w7]


def test_rows_become_markers_and_per_warp_ranges(tmp_path):
    """The host side of the log: rows in slot order (not time order), two warps of one block."""
    from tilecraft.ir import intrinsics as I
    events = [I.IketEvent(0, "total", "range_begin", str(tmp_path)), I.IketEvent(1, "m", "mark", str(tmp_path)),
              I.IketEvent(2, "f", "mark", str(tmp_path))]
    trace = IketTrace("k", events, "cuda")
    fbits = struct.unpack("<q", struct.pack("<d", 2.5))[0]
    rows = np.array([
        _row(0, 2, [1, 0, 0], 900, 90, warp=1),                    # warp 1's end, taken first
        _row(0, 1, [1, 0, 0], 100, 10, warp=0),
        _row(0, 1, [1, 0, 0], 110, 11, warp=1),
        _row(1, 0, [1, 0, 0], 500, 50, warp=0, lane=3, active=29, payload=-7, vkind=1),
        _row(2, 0, [1, 0, 0], 505, 51, warp=1, payload=fbits, vkind=2),
        _row(0, 2, [1, 0, 0], 800, 80, warp=0),
    ], dtype=np.int64)
    trace.record_rows(rows, dropped=0)
    data = json.loads(trace.path.read_text())
    assert data["target"] == "cuda" and data["granularity"] == "warp" and data["clock"] == "globaltimer_ns"
    launch = data["launches"][0]
    assert launch["dropped"] == 0
    assert [(m["name"], m["warp"], m["lane"], m["active_lanes"], m["payload"]) for m in launch["markers"]] == [
        ("m", 0, 3, 29, -7), ("f", 1, 0, 32, 2.5)]
    assert [(r["name"], r["warp"], r["start_ns"], r["end_ns"], r["duration_ns"], r["duration_cycles"])
            for r in launch["ranges"]] == [("total", 0, 100, 800, 700, 70), ("total", 1, 110, 900, 790, 79)]
    # an end without its begin: an error, unless rows were dropped (its begin may be among them)
    with pytest.raises(TilecraftError, match="without a begin"):
        trace.record_rows(rows[:1], dropped=0)
    trace.record_rows(rows[:1], dropped=5)
    assert json.loads(trace.path.read_text())["launches"][-1] == {"launch": 1, "markers": [], "ranges": [],
                                                                   "dropped": 5}


class _FakeDevice:
    """Device memory and the driver calls the iket launcher makes (runtime/iket.py), for the host
    side without a GPU; `run` plays the kernel: each (event, kind, block, warp) writes one row the
    way device/include/tilecraft/iket.h does (count bumped, rows past the capacity not written)."""

    def __init__(self, module_bytes: bytes):
        self.mem: dict = {}        # base address -> bytearray
        self.next = 0x1000
        self.calls: list = []
        cubin_meta = re.search(rb"__iket_meta_info", module_bytes)
        assert cubin_meta
        self.log = self.alloc(24)

    def alloc(self, n):
        base, self.next = self.next, self.next + n + 0x1000
        self.mem[base] = bytearray(n)
        return base

    def at(self, addr):
        for base, buf in self.mem.items():
            if base <= addr < base + len(buf):
                return buf, addr - base
        raise AssertionError(f"bad device address {addr:#x}")

    # the driver (cuda.bindings.driver's calling convention: (CUresult, *values))
    def cuCtxGetCurrent(self):
        return (0, 7)

    def cuModuleGetGlobal(self, handle, name):
        self.calls.append(("global", name))
        if name == b"tc_iket_log":
            return (0, self.log, 24)
        return (0, self.meta, len(self.mem[self.meta]))

    def cuMemcpyDtoH(self, dst, src, n):
        buf, off = self.at(src)
        ctypes.memmove(dst, bytes(buf[off:off + n]), n)
        return (0,)

    def cuMemcpyHtoD(self, dst, src, n):
        buf, off = self.at(dst)
        buf[off:off + n] = ctypes.string_at(src, n)
        return (0,)

    def cuMemsetD8Async(self, dst, value, n, stream):
        self.calls.append(("reset", stream))
        buf, off = self.at(dst)
        buf[off:off + n] = bytes([value]) * n
        return (0,)

    def cuStreamSynchronize(self, stream):
        self.calls.append(("sync", stream))
        return (0,)

    def cuStreamIsCapturing(self, stream):
        return (0, 0)

    def run(self, events):
        rows_ptr, cap, count = struct.unpack("<QQQ", bytes(self.mem[self.log]))
        for i, (eid, kind, block, warp) in enumerate(events):
            slot = count + i
            if slot < cap:
                buf, off = self.at(rows_ptr + slot * 64)
                buf[off:off + 64] = struct.pack("<8q", *_row(eid, kind, [block, 0, 0], 1000 + i, 100 + i, warp))
        self.mem[self.log][16:24] = struct.pack("<Q", count + len(events))
        self.calls.append(("launch", len(events)))


def test_the_launcher_resets_runs_and_reads_the_log(tmp_path, monkeypatch):
    """IketCudaLauncher's host side against a fake driver: the event table checked at load, the log
    allocated and pointed at, reset on the call's stream before each launch, read after it; a log too
    small reports the rows it dropped (warned) and grows for the next launch."""
    from tilecraft.runtime import cuda_launch
    from tilecraft.runtime import iket as rt
    with iket.session(output_dir=tmp_path):
        @T.prim_func
        def main(A: T.Tensor((256,), T.float32), C: T.Tensor((256,), T.float32)):
            with T.Kernel(2, threads=64) as bx, iket.range("total"):
                for i in T.Parallel(64):
                    C[bx * 64 + i] = A[bx * 64 + i]
                iket.mark("done")
        kernel = tilecraft.compile(main, out_idx=-1, target={"kind": "cuda", "arch": "sm_80"})
    launcher = kernel._launch
    assert isinstance(launcher, rt.IketCudaLauncher)
    fake = _FakeDevice(kernel.artifact.binary)
    meta = re.search(r'__iket_meta_info\[\] = "([^"]*)";', kernel.get_kernel_source()).group(1)
    text = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), meta).encode() + b"\0"
    fake.meta = fake.alloc(len(text))
    fake.mem[fake.meta][:] = text
    module = type("M", (), {"_drv": fake, "context": 7, "handle": 1, "device": 0})()
    entry = type("E", (), {"fn": type("F", (), {"module": module})()})()

    def load(self, device):
        self._stream_of = lambda dev: 55
        self._per_device[device] = entry
        return entry
    buffers = {}

    def alloc(self, nbytes):
        base = fake.alloc(nbytes)
        buffers[base] = nbytes
        return type("Rows", (), {"data_ptr": lambda s, b=base: b})()
    plan = []   # the events the next launch records
    monkeypatch.setattr(cuda_launch.CudaLauncher, "_load", load)
    monkeypatch.setattr(cuda_launch.CudaLauncher, "__call__", lambda self, *a, **k: fake.run(plan))
    monkeypatch.setattr(rt._DeviceLog, "_alloc", alloc)
    tensor = type("Tensor", (), {"get_device": lambda s: 0, "data_ptr": lambda s: 0})()

    plan[:] = [(0, 1, b, w) for b in range(2) for w in range(2)] + [(1, 0, b, w) for b in range(2) for w in range(2)] \
        + [(0, 2, b, w) for b in range(2) for w in range(2)]
    launcher([tensor, tensor], {}, "main")
    assert [c for c in fake.calls if c[0] != "global"] == [("reset", 55), ("launch", 12), ("sync", 55)]
    assert list(buffers.values()) == [rt.MIN_ROWS * 64]
    launch = json.loads(launcher.trace.path.read_text())["launches"][0]
    assert launch["dropped"] == 0 and len(launch["markers"]) == 4 and len(launch["ranges"]) == 4
    assert sorted((m["block"][0], m["warp"]) for m in launch["markers"]) == [(0, 0), (0, 1), (1, 0), (1, 1)]

    # a full log: rows past it counted, the launch says so; a larger log for the next launch
    monkeypatch.setattr(rt, "MIN_ROWS", 2)
    monkeypatch.setattr(rt, "MAX_ROWS", 8)
    launcher._logs[0].capacity = 0
    buffers.clear()
    with pytest.warns(RuntimeWarning, match="4 iket event"):
        launcher([tensor, tensor], {}, "main")
    assert list(buffers.values()) == [8 * 64]   # 2 blocks x 2 warps x 3 events asked for, MAX_ROWS given
    launch = json.loads(launcher.trace.path.read_text())["launches"][1]
    assert launch["dropped"] == 4 and len(launch["markers"]) + 2 * len(launch["ranges"]) <= 8
    monkeypatch.setattr(rt, "MAX_ROWS", 64)
    launcher([tensor, tensor], {}, "main")
    assert list(buffers.values()) == [8 * 64, 16 * 64]
    launch = json.loads(launcher.trace.path.read_text())["launches"][2]
    assert launch["dropped"] == 0 and len(launch["markers"]) == 4 and len(launch["ranges"]) == 4

    # a module compiled for another session's table is refused at load
    launcher._logs.clear()
    fake.mem[fake.meta][:] = text.replace(b"done", b"nope")
    with pytest.raises(TilecraftError, match="event table"):
        launcher([tensor, tensor], {}, "main")

"""The trace files of `tilelang.tools.cuda.iket` (language/iket.py): after each launch of a kernel
that records events, its log is read back and the launch is added to the kernel's trace,
`<session dir>/<kernel>.<n>.iket.json`:

    {"kernel": name, "target": "cpu" | "cuda", "clock": "steady_clock_ns" | "globaltimer_ns",
     "granularity": "block" | "warp", "event_table": {name: id},
     "launches": [{"launch": i, "markers": [{"name", "event_id", "block": [x, y, z], "timestamp_ns"[, "payload"]}],
                   "ranges": [{"name", "event_id", "block", "start_ns", "end_ns", "duration_ns"}]}]}

CPU target (device/include/tilecraft_cpu_iket.h, drained from the library): markers are per block
and per execution (a mark inside a `T.Parallel` loop is recorded once per element the block covers:
the CPU target runs a block's threads as one loop); timestamps are monotonic nanoseconds.

CUDA target (device/include/tilecraft/iket.h): as TileLang's IKET, events are per warp -- the lowest
active lane of each warp that executes an event writes one row, with its own payload -- into a log
in device memory that `IketCudaLauncher` allocates, points the module's `tc_iket_log` at, resets
before each launch and reads back after it.  Markers and ranges also carry "warp", "lane" (the
lane that wrote), "active_lanes", "sm" and "cycles" (clock64 of the warp's SM, which orders one
warp's events exactly); timestamps are %globaltimer nanoseconds.  A launch whose events overflow
the log says how many were "dropped" (the log grows for the next launch, up to `MAX_ROWS`).

Either way a range pairs each begin with the next end of the same event in the same block (CUDA:
the same warp).
"""
from __future__ import annotations

import ctypes
import itertools
import json
import struct
import threading
import warnings
from pathlib import Path

from ..errors import TilecraftError
from ..ir import collect
from ..ir import intrinsics as I
from .cuda_launch import CudaLauncher, _current_device, stream_handle

_ROW = 8
_KINDS = {v: k for k, v in I.IKET_KINDS.items()}
_SEQ = itertools.count()


class IketTrace:
    """The trace of one compiled kernel: its event table, its file, the launches so far."""

    def __init__(self, kernel_name: str, events: list, target: str = "cpu"):
        dirs = {e.trace_dir for e in events}
        if len(dirs) != 1:
            raise TilecraftError(f"{kernel_name}: its iket events come from several sessions ({', '.join(sorted(dirs))}); "
                                 f"parse a kernel inside one iket.session")
        self.names = {e.event_id: e.name for e in events}
        self.sites = len(events)   # the events the code records (a range: its begin and its end)
        self.kernel = kernel_name
        self.target = target
        self.path = Path(dirs.pop()) / f"{kernel_name}.{next(_SEQ)}.iket.json"
        self.launches: list = []

    @classmethod
    def of(cls, func, target: str = "cpu") -> "IketTrace | None":
        """The trace of `func` when it records events, else None."""
        calls = collect(func.body, lambda n: isinstance(n, I.IntrinsicCall) and isinstance(n.intrinsic, I.IketEvent))
        return cls(func.name, [c.intrinsic for c in calls], target) if calls else None

    def drain(self, lib) -> list:
        n = lib.tc_iket_count()
        buf = (ctypes.c_int64 * max(1, n))()
        got = lib.tc_iket_drain(buf, ctypes.c_int64(n))
        return [tuple(buf[i:i + _ROW]) for i in range(0, got, _ROW)]

    def record(self, lib) -> None:
        """Add the launch whose events are in `lib`'s log, and rewrite the trace file."""
        markers, ranges, open_ranges = [], [], {}
        for eid, kind, bx, by, bz, t, value, vkind in self.drain(lib):
            name, block = self.names.get(eid, str(eid)), [bx, by, bz]
            k = _KINDS[kind]
            if k == "mark":
                m = {"name": name, "event_id": eid, "block": block, "timestamp_ns": t}
                if vkind == 1:
                    m["payload"] = value
                elif vkind == 2:
                    m["payload"] = struct.unpack("<d", struct.pack("<q", value))[0]
                markers.append(m)
            elif k == "range_begin":
                open_ranges.setdefault((eid, bx, by, bz), []).append(t)
            else:
                starts = open_ranges.get((eid, bx, by, bz))
                if not starts:
                    raise TilecraftError(f"{self.kernel}: iket range {name!r} ended in block {block} without a begin")
                t0 = starts.pop()
                ranges.append({"name": name, "event_id": eid, "block": block, "start_ns": t0, "end_ns": t,
                               "duration_ns": t - t0})
        self._add({"markers": markers, "ranges": ranges})

    def record_rows(self, rows, dropped: int = 0) -> None:
        """Add a CUDA launch from the rows its log held (device/include/tilecraft/iket.h: 8 int64
        each, in the order the warps took slots) and the number of rows that did not fit."""
        events = []
        for slot, r in enumerate(rows):
            w0, w7 = int(r[0]) & (2 ** 64 - 1), int(r[7]) & (2 ** 64 - 1)
            events.append({"slot": slot, "event_id": w0 & 0xFFFFFFFF, "kind": _KINDS[(w0 >> 32) & 0xFF],
                           "vkind": (w0 >> 40) & 0xFF, "block": [int(r[1]), int(r[2]), int(r[3])],
                           "t": int(r[4]), "cycles": int(r[5]), "payload": int(r[6]), "warp": w7 & 0xFFFF,
                           "lane": (w7 >> 16) & 0xFF, "active": (w7 >> 24) & 0xFF, "sm": w7 >> 32})
        # one warp's events in its program order: clock64 of its SM (a warp stays on one SM)
        events.sort(key=lambda e: (e["block"], e["warp"], e["cycles"], e["slot"]))
        markers, ranges, open_ranges = [], [], {}
        for e in events:
            name = self.names.get(e["event_id"], str(e["event_id"]))
            where = {"block": e["block"], "warp": e["warp"], "sm": e["sm"]}
            if e["kind"] == "mark":
                m = {"name": name, "event_id": e["event_id"], **where, "lane": e["lane"],
                     "active_lanes": e["active"], "timestamp_ns": e["t"], "cycles": e["cycles"]}
                if e["vkind"] == 1:
                    m["payload"] = e["payload"]
                elif e["vkind"] == 2:
                    m["payload"] = struct.unpack("<d", struct.pack("<q", e["payload"]))[0]
                markers.append(m)
            elif e["kind"] == "range_begin":
                open_ranges.setdefault((e["event_id"], *e["block"], e["warp"]), []).append(e)
            else:
                starts = open_ranges.get((e["event_id"], *e["block"], e["warp"]))
                if not starts:
                    if dropped:
                        continue   # its begin did not fit in the log
                    raise TilecraftError(f"{self.kernel}: iket range {name!r} ended in block {e['block']} warp "
                                         f"{e['warp']} without a begin")
                b = starts.pop()
                ranges.append({"name": name, "event_id": e["event_id"], **where, "start_ns": b["t"],
                               "end_ns": e["t"], "duration_ns": e["t"] - b["t"], "start_cycles": b["cycles"],
                               "end_cycles": e["cycles"], "duration_cycles": e["cycles"] - b["cycles"]})
        markers.sort(key=lambda m: (m["timestamp_ns"], m["block"], m["warp"], m["cycles"]))
        ranges.sort(key=lambda r: (r["start_ns"], r["block"], r["warp"]))
        self._add({"markers": markers, "ranges": ranges, "dropped": int(dropped)})

    def _add(self, launch: dict) -> None:
        """Append a launch and rewrite the trace file."""
        self.launches.append({"launch": len(self.launches), **launch})
        cuda = self.target == "cuda"
        data = {"kernel": self.kernel, "target": self.target, "clock": "globaltimer_ns" if cuda else "steady_clock_ns",
                "granularity": "warp" if cuda else "block",
                "event_table": {n: i for i, n in sorted(self.names.items())}, "launches": self.launches}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.path)

    def bind(self, lib) -> None:
        lib.tc_iket_count.restype = ctypes.c_int64
        lib.tc_iket_drain.restype = ctypes.c_int64


# ---- the CUDA target ---------------------------------------------------------------------------

ROW_BYTES = 8 * 8
MIN_ROWS = 1 << 12      # the smallest log
MAX_ROWS = 1 << 22      # the largest (256 MiB): rows past it are counted as dropped
_LOG = b"tc_iket_log"            # device/include/tilecraft/iket.h: {rows, capacity, count}
_META = b"__iket_meta_info"      # codegen/cuda.py: the kernel's event table as JSON


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


class _DeviceLog:
    """The trace log of one loaded module: rows in device memory (a torch tensor, kept), the
    module's `tc_iket_log` pointed at them."""

    def __init__(self, module, trace: IketTrace, kernel: str):
        from .cuda_driver import _ContextScope, check
        self.drv, self.ctx, self.check, self.scope = module._drv, module.context, check, _ContextScope
        self.kernel, self.device = kernel, module.device
        with self.scope(self.drv, self.ctx):
            self.addr = int(check(self.drv.cuModuleGetGlobal(module.handle, _LOG), "cuModuleGetGlobal(tc_iket_log)",
                                  kernel)[0])
            meta, size = check(self.drv.cuModuleGetGlobal(module.handle, _META),
                               "cuModuleGetGlobal(__iket_meta_info)", kernel)
            raw = ctypes.create_string_buffer(int(size))
            check(self.drv.cuMemcpyDtoH(ctypes.addressof(raw), int(meta), int(size)), "cuMemcpyDtoH", kernel)
        table = json.loads(raw.raw.rstrip(b"\0").decode())["events"]
        want = {n: i for i, n in trace.names.items()}
        if table != want:
            raise TilecraftError(f"{kernel}: the compiled kernel's iket event table {table} is not the trace's {want}")
        self.rows = None
        self.capacity = 0

    def ensure(self, rows: int) -> None:
        """A log of at least `rows` rows (at most MAX_ROWS), told to the module."""
        rows = min(MAX_ROWS, max(MIN_ROWS, _pow2(rows)))
        if rows <= self.capacity:
            return
        self.rows = self._alloc(rows * ROW_BYTES)
        self.capacity = rows
        head = (ctypes.c_uint64 * 3)(self.rows.data_ptr(), rows, 0)
        with self.scope(self.drv, self.ctx):
            self.check(self.drv.cuMemcpyHtoD(self.addr, ctypes.addressof(head), 24), "cuMemcpyHtoD(tc_iket_log)",
                       self.kernel)

    def _alloc(self, nbytes: int):
        """Device memory for the rows (torch's allocator), ready before any stream uses it."""
        import torch
        t = torch.empty(nbytes // 8, dtype=torch.int64, device=torch.device("cuda", self.device))
        torch.cuda.synchronize(self.device)
        return t

    def capturing(self, stream: int) -> bool:
        """Whether `stream` is being captured into a CUDA graph (nothing may wait for it then)."""
        with self.scope(self.drv, self.ctx):
            status = self.check(self.drv.cuStreamIsCapturing(stream), "cuStreamIsCapturing", self.kernel)
        return int(status) != 0   # CU_STREAM_CAPTURE_STATUS_NONE

    def reset(self, stream: int) -> None:
        with self.scope(self.drv, self.ctx):
            self.check(self.drv.cuMemsetD8Async(self.addr + 16, 0, 8, stream), "cuMemsetD8Async(tc_iket_log)",
                       self.kernel)

    def read(self, stream: int) -> tuple:
        """Wait for the launch; its rows (an (n, 8) int64 array) and the number that did not fit."""
        import numpy as np
        with self.scope(self.drv, self.ctx):
            self.check(self.drv.cuStreamSynchronize(stream), "cuStreamSynchronize", self.kernel)
            count = ctypes.c_uint64(0)
            self.check(self.drv.cuMemcpyDtoH(ctypes.addressof(count), self.addr + 16, 8), "cuMemcpyDtoH", self.kernel)
            n = min(int(count.value), self.capacity)
            rows = np.zeros((n, 8), dtype=np.int64)
            if n:
                self.check(self.drv.cuMemcpyDtoH(rows.ctypes.data, self.rows.data_ptr(), n * ROW_BYTES),
                           "cuMemcpyDtoH", self.kernel)
        return rows, int(count.value) - n


def cuda_launcher(artifact, func, params, symbols):
    """The launcher of one CUDA kernel: an `IketCudaLauncher` when it records events, else the
    plain `CudaLauncher` (whose launches are untouched)."""
    trace = IketTrace.of(func, "cuda")
    if trace is None:
        return CudaLauncher(artifact, func, params, symbols)
    return IketCudaLauncher(artifact, func, params, symbols, trace)


class IketCudaLauncher(CudaLauncher):
    """A CUDA kernel that records iket events: each call resets its log, launches, waits for the
    launch and adds it to the trace (so these calls synchronise their stream, one at a time)."""

    def __init__(self, artifact, func, params, symbols, trace: IketTrace):
        super().__init__(artifact, func, params, symbols)
        self.trace = trace
        self._logs: dict = {}
        self._call_lock = threading.Lock()
        self._warned_graph = False

    def _load(self, device):
        entry = super()._load(device)
        with self._lock:
            if device not in self._logs:
                self._logs[device] = _DeviceLog(entry.fn.module, self.trace, self.name)
        return entry

    def __call__(self, tensors, symbols, kernel_name=None, stream=None):
        grid = self._grid or self.grid_for(symbols)
        device = tensors[0].get_device() if tensors else _current_device()
        with self._call_lock:
            if device not in self._logs:
                self._load(device)
            log = self._logs[device]
            stream = self._stream_of(device) if stream is None else stream_handle(stream)
            warps = -(-(self.block[0] * self.block[1] * self.block[2]) // 32)
            if log.capturing(stream):
                # inside a CUDA graph capture (do_bench(backend="cudagraph")) the launch cannot be
                # waited for: the kernel is captured as is and its replays are not in the trace
                if not self._warned_graph:
                    self._warned_graph = True
                    warnings.warn(f"{self.name}: a launch captured in a CUDA graph is not added to its iket trace "
                                  f"(the trace holds the launches made outside graphs)", RuntimeWarning, stacklevel=3)
                return super().__call__(tensors, symbols, kernel_name, stream)
            log.ensure(grid[0] * grid[1] * grid[2] * warps * self.trace.sites)   # one of each per warp
            log.reset(stream)
            super().__call__(tensors, symbols, kernel_name, stream)
            rows, dropped = log.read(stream)
            if dropped:
                warnings.warn(f"{self.name}: {dropped} iket event(s) did not fit the trace log of {log.capacity} rows "
                              f"and were dropped (the trace says so: launches[*].dropped)", RuntimeWarning,
                              stacklevel=3)
                log.ensure(len(rows) + dropped)   # room for the next launch
            self.trace.record_rows(rows, dropped)

    def fast_launch_state(self):
        return None   # the generated single-launch call would skip the log

"""The trace files of `tilelang.tools.cuda.iket` (language/iket.py): after each launch of a CPU kernel
that records events, its log (device/include/tilecraft_cpu_iket.h) is drained and the launch is added
to the kernel's trace, `<session dir>/<kernel>.<n>.iket.json`:

    {"kernel": name, "target": "cpu", "clock": "steady_clock_ns", "event_table": {name: id},
     "launches": [{"launch": i, "markers": [{"name", "event_id", "block": [x, y, z], "timestamp_ns"[, "payload"]}],
                   "ranges": [{"name", "event_id", "block", "start_ns", "end_ns", "duration_ns"}]}]}

Markers are per block and per execution (a mark inside a `T.Parallel` loop is recorded once per
element the block covers: the CPU target runs a block's threads as one loop); a range pairs each
begin with the next end of the same event in the same block.  Timestamps are monotonic nanoseconds.
"""
from __future__ import annotations

import ctypes
import itertools
import json
import struct
from pathlib import Path

from ..errors import TilecraftError
from ..ir import collect
from ..ir import intrinsics as I

_ROW = 8
_KINDS = {v: k for k, v in I.IKET_KINDS.items()}
_SEQ = itertools.count()


class IketTrace:
    """The trace of one compiled kernel: its event table, its file, the launches so far."""

    def __init__(self, kernel_name: str, events: list):
        dirs = {e.trace_dir for e in events}
        if len(dirs) != 1:
            raise TilecraftError(f"{kernel_name}: its iket events come from several sessions ({', '.join(sorted(dirs))}); "
                                 f"parse a kernel inside one iket.session")
        self.names = {e.event_id: e.name for e in events}
        self.kernel = kernel_name
        self.path = Path(dirs.pop()) / f"{kernel_name}.{next(_SEQ)}.iket.json"
        self.launches: list = []

    @classmethod
    def of(cls, func) -> "IketTrace | None":
        """The trace of `func` when it records events, else None."""
        calls = collect(func.body, lambda n: isinstance(n, I.IntrinsicCall) and isinstance(n.intrinsic, I.IketEvent))
        return cls(func.name, [c.intrinsic for c in calls]) if calls else None

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
        self.launches.append({"launch": len(self.launches), "markers": markers, "ranges": ranges})
        data = {"kernel": self.kernel, "target": "cpu", "clock": "steady_clock_ns",
                "event_table": {n: i for i, n in sorted(self.names.items())}, "launches": self.launches}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.path)

    def bind(self, lib) -> None:
        lib.tc_iket_count.restype = ctypes.c_int64
        lib.tc_iket_drain.restype = ctypes.c_int64

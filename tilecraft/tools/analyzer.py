"""`Analyzer.analysis(func, device)`: a roofline estimate of a kernel from its tile operations, with
the meaning of TileLang's `tilelang.tools.Analyzer`: FLOPs = 2*M*N*K per `T.gemm`, global bytes =
the elements of every `T.copy` that reads or writes a global tensor, each counted once per run of
its enclosing loops and once per block of the grid; the estimated time is the larger of bytes /
bandwidth and FLOPs / peak.

The counts are exact for static extents (a symbolic extent counts as 1).  Peaks come from the
device object when it carries them (`bandwidth` in MB/s as TileLang's carver devices do,
`peak_tflops`), else from a table keyed by compute capability (dense fp16 tensor-core peaks of
the usual SXM parts), else H100-class numbers.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Const
from ..ir.functor import Visitor
from ..ir.stmt import For, Kernel
from ..ir.tileop import Copy, Gemm

# compute capability -> (peak dense fp16 TFLOPS, HBM GB/s)
_PEAKS = {(8, 0): (312.0, 2039.0), (8, 6): (71.0, 936.0), (8, 9): (165.0, 1008.0), (9, 0): (989.0, 3350.0)}


@dataclass(frozen=True)
class AnalysisResult:
    total_flops: int
    total_global_bytes: int
    estimated_time: float   # seconds
    tflops: float
    bandwidth_GBps: float


def _static(x) -> int:
    if isinstance(x, int):
        return x
    if isinstance(x, Const):
        return int(x.value)
    return 1


class _Count(Visitor):
    _cache: dict = {}

    def __init__(self):
        self.flops = 0
        self.bytes = 0
        self.scale = [1]

    def visit_Kernel(self, k: Kernel):
        n = 1
        for g in k.grid:
            n *= _static(g)
        self.scale.append(self.scale[-1] * n)
        self.visit(k.body)
        self.scale.pop()

    def visit_For(self, f: For):
        self.scale.append(self.scale[-1] * max(0, _static(f.extent)))
        self.visit(f.body)
        self.scale.pop()

    def visit_Gemm(self, g: Gemm):
        c = g.c.extents
        k = g.a.extents[-2] if g.trans_a else g.a.extents[-1]
        self.flops += 2 * _static(c[-2]) * _static(c[-1]) * _static(k) * self.scale[-1]

    def visit_Copy(self, c: Copy):
        for region in (c.src, c.dst):
            if region.buffer.scope == "global":
                n = 1
                for e in region.extents:
                    n *= _static(e)
                self.bytes += n * region.buffer.dtype.bytes * self.scale[-1]
                return


def _peaks(device):
    bw = getattr(device, "bandwidth", None)
    peak = getattr(device, "peak_tflops", None)
    cc = getattr(device, "compute_capability", None)
    if isinstance(cc, str) and len(cc) >= 2 and cc[:2].isdigit():
        cc = (int(cc[0]), int(cc[1]))
    if cc is None:
        try:
            import torch
            cc = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
        except Exception:  # noqa: BLE001 - no usable GPU: the table's default
            cc = None
    table_peak, table_bw = _PEAKS.get(tuple(cc) if cc else (9, 0), _PEAKS[(9, 0)])
    gbps = (bw[1] if isinstance(bw, (list, tuple)) else bw) / 1000 if bw else table_bw
    return float(peak or table_peak), float(gbps)


class Analyzer:
    def __init__(self, fn, device):
        self.fn = getattr(fn, "prim_func", None) or getattr(fn, "func", None) or fn
        self.device = device
        self.total_flops = 0
        self.total_global_bytes = 0

    def ir_pass(self):
        c = _Count()
        c.visit(self.fn.body)
        self.total_flops, self.total_global_bytes = c.flops, c.bytes
        return self

    def calculate(self) -> AnalysisResult:
        peak, gbps = _peaks(self.device)
        t = max(self.total_global_bytes / (gbps * 1e9), self.total_flops / (peak * 1e12))
        return AnalysisResult(self.total_flops, self.total_global_bytes, float(t),
                              float(self.total_flops / t / 1e12) if t > 0 else 0.0, gbps)

    @classmethod
    def analysis(cls, fn, device):
        return cls(fn, device).ir_pass().calculate()

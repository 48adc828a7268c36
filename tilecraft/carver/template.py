"""`tilelang.carver.template`: `MatmulTemplate(M, N, K, in_dtype, out_dtype, accum_dtype)` with
`.with_arch(arch)`, `.equivalent_function()` and `.recommend_hints(topk)`, as TileLang's GEMM
autotuning examples use it.  TileLang's roller searches a cost model; tilecraft's search is small
and explicit: the tensor-core tiles its own GEMMs are measured with (benchmarks/BENCH.md), ordered
by how well they fill the device (enough blocks for every SM, little padding) and how little shared
memory they leave unused -- a starting list for the autotuner, which times them."""
from __future__ import annotations

from .roller import Hint, NoRasterization, Rasterization2DRow

# (block_M, block_N, block_K, warp_M, warp_N, stages): tensor-core tiles (warp tiles of 64x64 /
# 64x32 / 32x32) that the CUDA paths take (wgmma on sm_90a when the warps form whole warpgroups)
_CANDIDATES = [
    (128, 256, 64, 64, 64, 3), (128, 128, 64, 64, 64, 3), (128, 128, 32, 64, 32, 3), (128, 128, 32, 64, 64, 4),
    (64, 128, 64, 64, 32, 3), (128, 64, 64, 64, 32, 3), (64, 64, 64, 32, 32, 3), (64, 64, 32, 32, 32, 2),
    (256, 128, 64, 64, 64, 3), (64, 256, 64, 64, 64, 3),
]


class MatmulTemplate:
    def __init__(self, M, N, K, in_dtype="float16", out_dtype="float16", accum_dtype="float32", **_):
        self.M, self.N, self.K = int(M), int(N), int(K)
        self.in_dtype, self.out_dtype, self.accum_dtype = str(in_dtype), str(out_dtype), str(accum_dtype)
        self.arch = None

    def with_arch(self, arch) -> "MatmulTemplate":
        self.arch = arch
        return self

    def equivalent_function(self):
        """The plain tiled GEMM these hints are for (tilecraft.kernels.matmul's program)."""
        from ..kernels.gemm import matmul
        return matmul.fn(self.M, self.N, self.K, dtype=self.in_dtype, accum_dtype=self.accum_dtype)

    def recommend_hints(self, topk: int = 10) -> list:
        sms = getattr(self.arch, "compute_max_core", None) or 132
        smem = getattr(self.arch, "smem_cap", None) or 232448
        elem = 1 if "8" in self.in_dtype else 4 if "32" in self.in_dtype else 2

        def score(c):
            bm, bn, bk, _, _, st = c
            blocks = -(-self.M // bm) * -(-self.N // bn)
            waves = blocks / sms
            fill = min(waves, 1.0) if waves < 1 else waves / -(-waves // 1)    # last-wave occupancy
            pad = (self.M * self.N) / (-(-self.M // bm) * bm * -(-self.N // bn) * bn)
            return fill * pad * (bm * bn) ** 0.25

        ok = [c for c in _CANDIDATES if (c[0] * c[2] + c[2] * c[1]) * elem * c[5] <= smem]
        best = sorted(ok, key=score, reverse=True)[:max(1, int(topk))]
        return [Hint(block=[bm, bn], warp=[wm, wn], rstep=[bk], pipeline_stage=st,
                     rasterization_plan=Rasterization2DRow(8) if -(-self.M // bm) >= 8 else NoRasterization())
                for bm, bn, bk, wm, wn, st in best]

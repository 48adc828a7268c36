"""Probe (issue 9): the README's GEMM (128x128x32/3/128: one consumer warpgroup) warp-specialized as two
blocks per SM, the sm_90a default since session 10 (transform/warp_specialize.py, two_block_ring):
__launch_bounds__(256, 2), setmaxnreg 24/232, a ring of at least 4 stages of the program's own k-tiles,
the consumer loop unrolled by the ring's depth.  Forms, all from the generator (the `unroll` edit aside):
  default                 the split as generated
  unsplit                 tc.warp_specialize False: thread 0 refills a stage after a block barrier
                          (k-tiles widened to 64, 3 stages)
  split, 6 stages         the program written with num_stages=6 (consumer loop unrolled 6x)
  split, 6 stages rolled  the same with the unroll taken back (#pragma unroll 1): what the unroll buys
What led here (session 10, benchmarks/results/2026-12-01_h200_s10_ws_probes.md): hand edits of the
older one-block split found the shared-memory carveout, the barriers' 2 KB and the producer's wait
irrelevant, a 3-stage ring too shallow, and a rolled loop over 3, 5 or 6 stages 5% slower.
Rows are checked against torch.matmul on fresh random inputs and timed interleaved with it
(swapped_source.race: CUDA events, median of per-round ratios).
    [PROBE_DTYPE=bfloat16] python scripts/repro/gemm_ws_two_blocks_probe.py [MxNxK ...]  ->  markdown
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from swapped_source import compile_swapped, gemm_problems, generated_source, race  # noqa: E402

from tilecraft.kernels.gemm import matmul  # noqa: E402


def unrolled(src: str, times: int) -> str:
    """The source with its main loop's unroll (the consumer's, when split) set to `times`."""
    import re
    assert len(re.findall(r"#pragma unroll \d+\n", src)) == 1, "the generated source changed shape"
    return re.sub(r"#pragma unroll \d+\n", f"#pragma unroll {times}\n", src)


def retire_each_tile(src: str, stages: int, generated_blocks: int) -> str:
    """The split source made two blocks per SM (when generated with one) with every k-tile's wgmmas retired
    before the next tile's are issued (wait_group 0 instead of 1), so each stage is released right after its
    own wgmmas: with two blocks per SM the other block's wgmmas fill the tensor cores meanwhile."""
    import re
    if generated_blocks == 1:
        src = src.replace("__launch_bounds__(256, 1)", "__launch_bounds__(256, 2)")
        src = src.replace("  if (tc_tid >= 128) {\n", "  if (tc_tid >= 128) {\n    tc::warpgroup_reg_dealloc<24>();\n", 1)
        src = src.replace("  } else {\n    float C_local[128];",
                          "  } else {\n    tc::warpgroup_reg_alloc<232>();\n    float C_local[128];", 1)
    src, n1 = re.subn(r"(gemm_ss_sm90<128, 128, \d+, 1, false, false, tc::\w+), 1,", r"\1, 0,", src)
    release = re.compile(r"if \(\(0 < ko\)\) \{\n\s*tc::mbar_arrive_warp\(\(&tma_empty\[\(\(ko \+ \d+\) % \d+\)\]\)\);\n\s*\}")
    src, n2 = release.subn(f"tc::mbar_arrive_warp((&tma_empty[(ko % {stages})]));", src)
    assert n1 == 1 and n2 == 1 and "__launch_bounds__(256, 2)" in src and "reg_alloc<232>" in src, (n1, n2)
    return src


def occupancy(kern) -> int:
    from cuda.bindings import driver as drv
    fn, launch = kern._launch.function(0), kern._launch
    err, n = drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn.handle, launch.block[0] * launch.block[1], launch.smem)
    return n


def main():
    torch.manual_seed(0)
    rows = []
    unsplit = {"tc.warp_specialize": False}
    for size, m, n, k, a, b, ref in gemm_problems():
        mm = lambda a=a, b=b: torch.matmul(a, b)  # noqa: E731

        def row(form, stages, configs=None, unroll=None, bk=32, wait0=0):
            fn = matmul.get_tir(m, n, k, 128, 128, bk, stages, 128, dtype=str(a.dtype).split(".")[-1])
            src = unrolled(generated_source(fn, configs), unroll) if unroll else None
            if wait0:
                src = retire_each_tile(generated_source(fn, configs), stages, wait0)

            def build(fn=fn, src=src, size=size):
                kern = compile_swapped(fn, src, configs)
                print(f"<!-- {size} {form}: {kern._launch.smem} B shared, {kern._launch.block[0]} threads, "
                      f"{occupancy(kern)} blocks/SM possible -->")
                return kern
            return (size, form, build, (a, b), ref, mm)

        forms = [row("default: split, two blocks per SM, 32/4 unrolled", 3),
                 row("unsplit (tc.warp_specialize False): 64/3", 3, unsplit),
                 row("split, num_stages=6 (unrolled 6x)", 6),
                 row("split, num_stages=6, rolled", 6, None, 1),
                 row("split, two blocks, 64/3, each tile retired (wait_group 0)", 3, {"tc.warp_specialize": True},
                     bk=64, wait0=1),
                 row("split, two blocks, 32/4, each tile retired (wait_group 0)", 4, None, wait0=2)]
        rows += [f for f in forms if not os.environ.get("PROBE_FORMS") or any(
            w in f[1] for w in os.environ["PROBE_FORMS"].split(","))]
    race(rows)


if __name__ == "__main__":
    main()

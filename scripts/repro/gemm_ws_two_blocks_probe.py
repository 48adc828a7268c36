"""Probe (issue 9): can the README's GEMM (128x128x32/3/128: one consumer warpgroup) be warp-specialized
without losing its second block per SM?

The generated warp-specialized form launches 256 threads with __launch_bounds__(256, 1): the consumer's
128 accumulators make ptxas use ~154 registers a thread, so only one block fits an SM, where the unsplit
TMA loop (128 threads) runs two.  setmaxnreg can give both back: launch with __launch_bounds__(256, 2)
(128 registers a thread), the producer warpgroup drops to 24 and the consumer rises to 232
(128 x 24 + 128 x 232 = 256 x 128).  Forms, from the source tilecraft generates (swapped in through the
post-processing callback, same tensor maps):
  unsplit                 the default today (TMA loop, thread 0 issues, two blocks per SM)
  ws                      tc.warp_specialize as generated (one block per SM)
  ws, two blocks per SM   ws with __launch_bounds__(256, 2) and setmaxnreg 24 / 232
Rows are checked against torch.matmul on fresh random inputs and timed interleaved with it
(swapped_source.race: CUDA events, median of per-round ratios).
    python scripts/repro/gemm_ws_two_blocks_probe.py [MxNxK ...]   ->  a markdown table on stdout"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from swapped_source import compile_swapped, gemm_problems, generated_source, race  # noqa: E402

from tilecraft.kernels.gemm import matmul  # noqa: E402

WS = {"tc.warp_specialize": True}


def two_blocks(src: str) -> str:
    """The generated warp-specialized source with two blocks per SM and the registers moved."""
    edits = (("__launch_bounds__(256, 1)", "__launch_bounds__(256, 2)"),
             ("  if (tc_tid >= 128) {\n", "  if (tc_tid >= 128) {\n    tc::warpgroup_reg_dealloc<24>();\n"),
             ("  } else {\n    float C_local[128];", "  } else {\n    tc::warpgroup_reg_alloc<232>();\n    float C_local[128];"))
    for old, new in edits:
        assert src.count(old) == 1, f"the generated source changed shape near {old!r}"
        src = src.replace(old, new)
    return src


def main():
    torch.manual_seed(0)
    rows = []
    for size, m, n, k, a, b, ref in gemm_problems():
        fn = matmul.get_tir(m, n, k, 128, 128, 32, 3, 128)
        mm = lambda a=a, b=b: torch.matmul(a, b)  # noqa: E731
        rows += [(size, "unsplit (default)", lambda fn=fn: compile_swapped(fn), (a, b), ref, mm),
                 (size, "ws (one block per SM)", lambda fn=fn: compile_swapped(fn, None, WS), (a, b), ref, mm),
                 (size, "ws, two blocks per SM (setmaxnreg 24/232)",
                  lambda fn=fn, s=two_blocks(generated_source(fn, WS)): compile_swapped(fn, s, WS), (a, b), ref, mm)]
    race(rows)

if __name__ == "__main__":
    main()

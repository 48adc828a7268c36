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
  ws, two blocks per SM   ws with __launch_bounds__(256, 2) and setmaxnreg 24 / 232, with the ring as
                          generated (64/3) and deeper rings of the unwidened 32-half k-tiles (32/4, 32/6:
                          is the release-to-refill latency what the 3-stage split form loses?)
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


def packed(src: str, ring_bytes: int) -> tuple[str, int]:
    """`src` with the tiles from byte 0 and the full/empty mbarriers after them (generated: two 1024-byte
    slots in front, 2 KB that decide whether two blocks fit the SM's shared-memory carveout)."""
    for old, new in (("tc_smem + 0)", f"tc_smem + {ring_bytes})"), ("tc_smem + 1024)", f"tc_smem + {ring_bytes + 64})"),
                     ("tc_smem + 2048)", "tc_smem + 0)"), ("tc_smem + 51200)", "tc_smem + 49152)")):
        assert old in src, f"the generated source changed shape near {old!r}"
        src = src.replace(old, new)
    return src, ring_bytes + 128


SPIN = """
__device__ __forceinline__ void tc_spin_wait(tc::uint64_t* bar, int parity) {
  unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("{\\n .reg .pred p;\\n SPIN%=:\\n mbarrier.test_wait.parity.shared::cta.b64 p, [%0], %1;\\n"
               " @!p bra SPIN%=;\\n}\\n" ::"r"(addr), "r"(parity) : "memory");
}
"""


def spinning_producer(src: str) -> str:
    """The producer polls its empty barriers with test_wait (no suspend) instead of try_wait."""
    head = '#include "tilecraft/tilecraft.h"\n'
    old = "tc::mbar_wait_parity((&tma_empty["
    assert src.count(old) == 1 and head in src, "the generated source changed shape"
    return src.replace(head, head + SPIN).replace(old, "tc_spin_wait((&tma_empty[")


def carveout(kern, percent=100):
    """Ask the driver for `percent` of the unified L1/shared memory as shared memory for this kernel."""
    from cuda.bindings import driver as drv
    fn = kern._launch.function(0)
    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
    err, = drv.cuFuncSetAttribute(fn.handle, attr, percent)
    assert int(err) == 0, err
    return kern


def occupancy(kern) -> int:
    from cuda.bindings import driver as drv
    fn, launch = kern._launch.function(0), kern._launch
    err, n = drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn.handle, launch.block[0] * launch.block[1], launch.smem)
    return n


def unrolled(src: str, times: int) -> str:
    """The main loop (the consumer's, when split) unrolled `times` times: with a ring of S stages and S
    a divisor of the unroll, every stage index, barrier address and parity is a constant."""
    import re
    loops = re.findall(r"\n( *)for \(int ko = 0;", src)
    assert len(loops) == 1, "the generated source changed shape"
    return re.sub(r"\n( *)for \(int ko = 0;", lambda m: f"\n{m.group(1)}#pragma unroll {times}\n{m.group(1)}for (int ko = 0;", src)


def main():
    torch.manual_seed(0)
    rows = []
    flat = {"tc.widen_k_tiles": False}
    for size, m, n, k, a, b, ref in gemm_problems():
        mm = lambda a=a, b=b: torch.matmul(a, b)  # noqa: E731

        def row(form, bk, stages, configs, split, pack=False, spin=False, smem=None, carve=None, unroll=None):
            fn = matmul.get_tir(m, n, k, 128, 128, bk, stages, 128)
            if split:
                src = two_blocks(generated_source(fn, {**WS, **configs}))
                if pack:
                    src, smem = packed(src, 98304)
                if spin:
                    src = spinning_producer(src)
                if unroll:
                    src = unrolled(src, unroll)
                make = lambda fn=fn, s=src, c={**WS, **configs}, b=smem: compile_swapped(fn, s, c, smem=b)  # noqa: E731
            elif unroll:
                src = unrolled(generated_source(fn, configs or None), unroll)
                make = lambda fn=fn, s=src, c=configs or None, b=smem: compile_swapped(fn, s, c, smem=b)  # noqa: E731
            else:
                make = lambda fn=fn, c=configs or None, b=smem: compile_swapped(fn, None, c, smem=b)  # noqa: E731

            def build(make=make, size=size):
                kern = make() if carve is None else carveout(make(), carve)
                print(f"<!-- {size} {form}: {kern._launch.smem} B shared, {occupancy(kern)} blocks/SM possible -->")
                return kern
            return (size, form, build, (a, b), ref, mm)

        pad = 100352   # the warp-specialized 64/3 form's bytes
        forms = [row("unsplit (default: 32/3 widened to 64/3)", 32, 3, {}, False),
                 row("unsplit 64/3, main loop unrolled 3x", 32, 3, {}, False, unroll=3),
                 row("unsplit 64/3, padded to 100352 B", 32, 3, {}, False, smem=pad),
                 row("unsplit 64/3, carveout 100%", 32, 3, {}, False, carve=100),
                 row("ws, two blocks per SM (setmaxnreg 24/232), 64/3", 32, 3, {}, True),
                 row("ws, two blocks per SM, 64/3, carveout 100%", 32, 3, {}, True, carve=100),
                 row("ws, two blocks per SM, 64/3, consumer loop unrolled 3x", 32, 3, {}, True, unroll=3),
                 row("ws, two blocks per SM, 32/6, consumer loop unrolled 6x", 32, 6, flat, True, unroll=6),
                 row("ws, two blocks per SM, 32/5, consumer loop unrolled 5x", 32, 5, flat, True, unroll=5),
                 row("ws, two blocks per SM, 32/4", 32, 4, flat, True),
                 row("ws, two blocks per SM, 32/4, padded to 100352 B", 32, 4, flat, True, smem=pad),
                 row("ws, two blocks per SM, 32/4, carveout 100%", 32, 4, flat, True, carve=100),
                 row("ws, two blocks per SM, 32/6, carveout 100%", 32, 6, flat, True, carve=100),
                 row("ws, two blocks per SM, 32/5", 32, 5, flat, True),
                 row("ws, two blocks per SM, 32/6", 32, 6, flat, True),
                 row("ws, two blocks per SM, 32/3", 32, 3, flat, True),
                 row("ws, two blocks per SM, 64/2", 64, 2, flat, True),
                 row("ws, two blocks per SM, 64/3, producer spins (test_wait)", 32, 3, {}, True, spin=True),
                 row("ws, two blocks per SM, 64/3, barriers packed after the tiles", 32, 3, {}, True, True)]
        rows += [f for f in forms if not os.environ.get("PROBE_FORMS") or any(
            w in f[1] for w in os.environ["PROBE_FORMS"].split(","))]
        if "--one-block" in os.environ.get("PROBE_FORMS", ""):
            rows.append((size, "ws (one block per SM)",
                         lambda: compile_swapped(matmul.get_tir(m, n, k, 128, 128, 32, 3, 128), None, WS),
                         (a, b), ref, mm))
    race(rows)


if __name__ == "__main__":
    main()

"""TileLang's Blackwell-only constructs (tcgen05 MMA and tensor memory, block-scaled MMA, cluster
launch control): each is refused at the user's line with the architecture it needs.  tilecraft
compiles for the CPU target and CUDA sm_80 / sm_90a; a Blackwell backend is a later step, and
emulating these on other targets would not be the program the user wrote (its tensor-memory
traffic, barriers and 2-CTA pairs are the point of it)."""
from __future__ import annotations

from .builder import caller_span, current_span

# name -> (architecture, what the construct is)
BLACKWELL = {
    "tcgen05_gemm": ("sm_100", "a tcgen05 MMA into tensor memory"),
    "tcgen05_gemm_blockscaled": ("sm_100", "a block-scaled tcgen05 MMA (MX formats with scale factors)"),
    "tcgen05_mma_arrive": ("sm_100", "an mbarrier arrival when tcgen05 MMAs complete"),
    "tcgen05_sf_warp_transpose": ("sm_100", "the scale-factor transpose for block-scaled tcgen05 MMA"),
    "tcgen05_cp_warpx4": ("sm_100", "a shared-to-tensor-memory copy (tcgen05.cp)"),
    "tcgen05_ld": ("sm_100", "a tensor-memory load (tcgen05.ld)"),
    "tcgen05_st": ("sm_100", "a tensor-memory store (tcgen05.st)"),
    "tcgen05_before_thread_sync": ("sm_100", "a tcgen05 fence"),
    "tcgen05_after_thread_sync": ("sm_100", "a tcgen05 fence"),
    "alloc_tmem": ("sm_100", "a tensor-memory allocation"),
    "alloc_tcgen05_smem_desc": ("sm_100", "a tcgen05 shared-memory descriptor"),
    "alloc_tcgen05_instr_desc": ("sm_100", "a tcgen05 instruction descriptor"),
    "initialize_tcgen05_descriptor": ("sm_100", "a tcgen05 shared-memory descriptor"),
    "clc_try_cancel": ("sm_100", "cluster launch control (clusterlaunchcontrol.try_cancel)"),
    "clc_try_cancel_multicast": ("sm_100", "cluster launch control (clusterlaunchcontrol.try_cancel.multicast)"),
    "clc_is_canceled": ("sm_100", "cluster launch control (query_cancel.is_canceled)"),
    "clc_get_first_ctaid_x": ("sm_100", "cluster launch control (query_cancel.get_first_ctaid)"),
    "clc_get_first_ctaid_y": ("sm_100", "cluster launch control (query_cancel.get_first_ctaid)"),
    "clc_get_first_ctaid_z": ("sm_100", "cluster launch control (query_cancel.get_first_ctaid)"),
    "mma_gemm_blockscaled": ("sm_120", "a block-scaled mma.sync (MX / NV FP4 formats with scale factors)"),
}


def _refuse(name: str, arch: str, what: str):
    def construct(*args, **kwargs):
        from ..errors import TilecraftError
        raise TilecraftError(
            f"T.{name} is {what}, which needs an {arch} (Blackwell) GPU; tilecraft compiles for the CPU target "
            f"and CUDA sm_80 / sm_90a, which have no such instruction", current_span() or caller_span(),
            hint="write the kernel with T.gemm / T.copy inside T.Pipelined: tilecraft picks mma.sync or wgmma "
                 "(sm_90a) for it")
    construct.__name__ = construct.__qualname__ = name
    construct.__doc__ = f"Refused here: {what} ({arch} only)."
    return construct


globals().update({name: _refuse(name, arch, what) for name, (arch, what) in BLACKWELL.items()})
__all__ = sorted(BLACKWELL)

"""TileLang's Blackwell-only constructs.  Tensor memory and the tcgen05 MMA with its commit
(language/tcgen05.py) run on the CPU target, whose exact semantics need no Blackwell hardware, and
are refused by every CUDA target at the user's line naming sm_100.  The ones below (block-scaled
MMA, tensor-memory copies and loads by hand, descriptors, cluster launch control) are refused at the
user's line with the architecture they need, on every target."""
from __future__ import annotations

from .builder import caller_span, current_span

# name -> (architecture, what the construct is)
BLACKWELL = {
    "tcgen05_gemm_blockscaled": ("sm_100", "a block-scaled tcgen05 MMA (MX formats with scale factors)"),
    "tcgen05_sf_warp_transpose": ("sm_100", "the scale-factor transpose for block-scaled tcgen05 MMA"),
    "tcgen05_cp_warpx4": ("sm_100", "a shared-to-tensor-memory copy (tcgen05.cp)"),
    "tcgen05_ld": ("sm_100", "a tensor-memory load (tcgen05.ld)"),
    "tcgen05_st": ("sm_100", "a tensor-memory store (tcgen05.st)"),
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
from .tcgen05 import (alloc_tmem, tcgen05_gemm, tcgen05_mma_arrive, tcgen05_before_thread_sync,  # noqa: E402
                      tcgen05_after_thread_sync)
from . import tcgen05 as _tcgen05  # noqa: E402
__all__ = sorted(BLACKWELL) + _tcgen05.__all__

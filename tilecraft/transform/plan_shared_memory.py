"""Place every shared buffer in the block's dynamic shared memory (CUDA targets).

Before: `Alloc`s of shared buffers anywhere in the kernel.  After: the attribute `smem_offsets`
maps each shared buffer to its byte offset (128-byte aligned, which TMA and 16-byte vector
accesses need) and `smem_bytes` is the total.  A kernel that needs more than the architecture
allows per block is rejected here with every buffer and its size listed.
"""
from __future__ import annotations

from ..errors import TilecraftError
from ..ir import Alloc, Kernel, collect
from ..ir.func import PrimFunc

ALIGN = 128


def plan_shared_memory(func: PrimFunc, target) -> PrimFunc:
    offsets, total = {}, 0
    for k in collect(func.body, lambda n: isinstance(n, Kernel)):
        off = 0
        bufs = [a.buffer for a in collect(k.body, lambda n: isinstance(n, Alloc)) if a.buffer.scope == "shared"]
        for b in bufs:
            if b in offsets:
                continue
            off = -(-off // ALIGN) * ALIGN
            offsets[b] = off
            off += b.nbytes
        total = max(total, off)
        limit = target.max_shared_memory
        if off > limit:
            listing = ", ".join(f"{b.name} {tuple(b.shape)} {b.dtype} = {b.nbytes} B" for b in bufs)
            raise TilecraftError(
                f"the kernel needs {off} bytes of shared memory per block but {target.arch} allows at most "
                f"{limit} bytes: {listing}", k.span,
                hint="use smaller tiles (block_M/block_N/block_K) or fewer pipeline stages (num_stages)")
    return func.with_attr("smem_offsets", offsets).with_attr("smem_bytes", total)

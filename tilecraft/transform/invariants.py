"""The invariants `run_pipeline` checks between passes (transform/pipeline.py): each takes the
function a pass returned and says what is wrong ('' when it holds).  The pipelines name which
checks follow which pass (`CUDA_INVARIANTS`, `invariants_for`)."""
from __future__ import annotations

from ..ir import Alloc, For, TileOp, collect, where
from ..ir.func import PrimFunc


def no_tile_ops(func: PrimFunc) -> str:
    ops = collect(func.body, lambda n: isinstance(n, TileOp))
    return f"a tile operation is left ({type(ops[0]).__name__} at {where(ops[0].span)})" if ops else ""


def shared_buffers_placed(func: PrimFunc) -> str:
    offsets = func.lowering.smem_offsets
    for a in collect(func.body, lambda n: isinstance(n, Alloc)):
        if a.buffer.scope == "shared" and a.buffer not in offsets:
            return f"shared buffer {a.buffer.name} has no offset in dynamic shared memory"
    return ""


def plans_built(func: PrimFunc) -> str:
    planned = collect(func.body, lambda n: isinstance(n, For) and n.plan is not None)
    return f"the pipelined loop at {where(planned[0].span)} was planned but not rewritten" if planned else ""

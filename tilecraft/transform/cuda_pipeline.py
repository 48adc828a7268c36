"""The CUDA pass pipeline (sm_80 and newer), in order, with the reason for each position, and the
invariants `run_pipeline` checks after some of them (transform/pipeline.py)."""
from .check_regions import check_regions
from .infer_layouts import infer_layouts
from .inline_copy_lets import inline_copy_lets
from .invariants import no_tile_ops, plans_built, shared_buffers_placed
from .insert_syncs import insert_syncs
from .hoist_invariants import hoist_invariants
from .legalize_global_access import legalize_global_access
from .lower_cuda import lower_cuda
from .lower_manual_sync_cuda import lower_manual_sync_cuda
from .overlap_independent_gemms import overlap_independent_gemms
from .plan_shared_layouts import plan_shared_layouts
from .place_bulk_waits import place_bulk_waits
from .plan_shared_memory import plan_shared_memory
from .shift_parallel_anchors import shift_parallel_anchors
from .pipeline_copies import pipeline_copies
from .plan_pipelines import plan_pipelines
from .stage_epilogue import stage_epilogue
from .stage_gemm_operands import stage_gemm_operands
from .stage_reduce_destinations import stage_reduce_destinations
from .validate import validate
from .widen_k_tiles import widen_k_tiles

CUDA_PIPELINE = [
    # A valid program within the target's limits, or an error at the user's line, before any
    # lowering can loop or crash on it (transform/validate/).
    validate,
    # Errors first, while tile ops still carry the user's intent and line.
    check_regions,
    # The program's own mbarriers and register budgets become intrinsics; a kernel that
    # specializes warp groups by hand (T.ws) is marked so the pipelining below leaves it alone.
    lower_manual_sync_cuda,
    # sm_90a: a TMA + wgmma main loop of short k-tiles (64-byte rows) takes 128-byte ones, before
    # anything plans the gemm or its shared tiles.
    widen_k_tiles,
    # T.Parallel nests that reach a fragment only at an offset from their loop variables run over
    # that fragment's coordinates instead, so the layout inference below sees an anchor.
    shift_parallel_anchors,
    # Reductions into shared tiles go through a fragment (the reduction lowering's destination),
    # before the layout inference lays that fragment out.
    stage_reduce_destinations,
    # Fragments get register layouts: gemm accumulators fix theirs, the rest follow.
    infer_layouts,
    # Fragment operands the tensor cores cannot read from registers (another layout, transposed
    # A, fragment B) go through a shared tile; needs the plans and layouts, before shared planning.
    stage_gemm_operands,
    # Accumulator stores to global go through a padded shared tile (16-byte coalesced stores);
    # needs the gemm plans from infer_layouts, and runs before anything places shared memory.
    stage_epilogue,
    # Gemms decide which shared tiles they need swizzled, before anything addresses them.
    plan_shared_layouts,
    # A pipelined loop's copies at a position the body names (`pos = k * block_N`) take the name's
    # expression, so the planner below can issue them for later iterations.
    inline_copy_lets,
    # T.Pipelined: each loop's form (cp.async, TMA, warp-specialized, persistent) decided once, as a
    # plan on the loop; needs the gemm plans and the shared tiles' swizzles (TMA boxes follow them).
    plan_pipelines,
    # Each planned loop rewritten from its plan: its shared tiles multi-buffered, its copies issued ahead.
    pipeline_copies,
    # Two independent wgmma gemms in a row issue back to back, each waited for where its accumulator is
    # next used; after the loops' own forms (which keep their groups in flight), on tile ops.
    overlap_independent_gemms,
    # Tile ops and parallel loops become per-thread code over registers and shared memory.
    lower_cuda,
    # Deferred bulk reduces (T.atomic_add of a shared tile, sm_90+): their waits before the tile is
    # written again; before plan_shared_memory, which must see the tile live up to them.
    place_bulk_waits,
    # Ragged edges: guard global accesses that may fall outside their tensors.
    legalize_global_access,
    # Offsets in dynamic shared memory (reusing the bytes of dead buffers) and the per-block
    # budget check, after lowering has added its scratch buffers.
    plan_shared_memory,
    # Barriers between shared-memory producers and consumers, by address range, so a buffer that
    # reuses another's bytes waits for the old one's last readers.
    insert_syncs,
    # Last, on the final code: the parts of an unrolled loop's indices that do not change in it
    # become Lets before it (the device compiler's time goes into folding them back otherwise).
    hoist_invariants,
]


CUDA_INVARIANTS = {
    pipeline_copies: (plans_built,),                # every planned loop rewritten from its plan
    lower_cuda: (no_tile_ops,),                     # the printers see thread-level code only
    plan_shared_memory: (shared_buffers_placed,),   # insert_syncs compares byte ranges
}

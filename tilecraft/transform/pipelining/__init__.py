"""The rewrites of pipelined loops, one module per plan class (ir/loop_plan.py).

`transform/pipeline_copies.py` stages a planned loop's shared tiles (`parts.LoopParts`) and calls
`build(loop, plan, ctx)` with the builder registered for the plan's class in `BUILDERS`; each form's
module registers its own (`@BUILDERS.register(PlanClass)`).  `BuildCtx` is what every builder may
read or add to: the block's threads, the fragment layouts, the kernel's TMA descriptors so far and
the statements a persistent walk puts around itself.  Nothing here decides a form: the plan says.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...registry import Registry

BUILDERS = Registry("pipelined loop builder")


@dataclass
class BuildCtx:
    threads: int                  # the block's threads (the consumers' in a warp-specialized kernel)
    layouts: dict                 # fragment Buffer -> FragmentLayout (infer_layouts)
    tma_descs: list = field(default_factory=list)   # (global buffer, box, swizzle, split) per tensor-map parameter
    walk_before: list = field(default_factory=list)  # a persistent walk's ring set-up, before the walk
    walk_after: list = field(default_factory=list)   # and its clean-up, after it


def build(loop, plan, ctx: BuildCtx):
    """The statements that replace `loop` (a parts.LoopParts) as `plan` says."""
    return BUILDERS.lookup(type(plan))(loop, plan, ctx)


def _register_forms() -> None:
    from . import cp_async, persistent, tma, warp_specialized, wgmma_async  # noqa: F401


_register_forms()

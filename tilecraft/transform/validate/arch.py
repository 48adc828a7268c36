"""Constructs only some CUDA architectures have (ir/blackwell.py `ArchNeed`: tensor memory and the
tcgen05 MMA, sm_100; `Kernel.cluster`: thread-block clusters, sm_90) are refused, at their line, on a CUDA target that lacks them or
that tilecraft's CUDA backend has no lowering for; the CPU target executes them all.

Before and after: the parsed IR, unchanged.  Runs first: the other rules and every CUDA pass may
assume the program uses only what its target has.
"""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import Annotate, AnnotationKey, Kernel, collect

CLUSTER_SM = 90   # thread-block clusters exist from sm_90 on


def check_arch(func, target) -> None:
    if target.kind != "cuda" or func.body is None:
        return
    for k in collect(func.body, lambda n: isinstance(n, Kernel) and n.cluster):
        if target.sm < CLUSTER_SM:
            raise TilecraftError(
                f"T.ClusterKernel(cluster_dims={k.cluster}): thread-block clusters need an sm_90 GPU or newer; the "
                f"target {target.arch} has none", k.span,
                hint="T.Kernel (no clusters) when the blocks do not share barriers or shared memory")
    for a in collect(func.body, lambda n: isinstance(n, Annotate) and n.key == AnnotationKey.REQUIRES_ARCH):
        need = a.value
        if target.sm < need.sm:
            raise TilecraftError(
                f"{need.construct} is {need.what}, which needs an {need.arch} GPU or newer; the "
                f"target {target.arch} has none", a.span,
                hint="the CPU target runs it (target='cpu', or TILECRAFT_RUN_ON_CPU=1 for a whole program)")
        if not need.cuda_path:
            raise TilecraftError(
                f"{need.construct} is {need.what} ({need.arch}); tilecraft's CUDA backend has no lowering for it "
                f"yet (target {target.arch})", a.span,
                hint="the CPU target runs it (target='cpu', or TILECRAFT_RUN_ON_CPU=1 for a whole program)")

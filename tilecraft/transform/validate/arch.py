"""Constructs only some CUDA architectures have (ir/blackwell.py `ArchNeed`: tensor memory, the
tcgen05 MMA, thread-block clusters) are refused, at their line, on a CUDA target that lacks them or
that tilecraft's CUDA backend has no lowering for; the CPU target executes them all.

Before and after: the parsed IR, unchanged.  Runs first: the other rules and every CUDA pass may
assume the program uses only what its target has.
"""
from __future__ import annotations

from ...errors import TilecraftError
from ...ir import Annotate, AnnotationKey, collect


def check_arch(func, target) -> None:
    if target.kind != "cuda" or func.body is None:
        return
    for a in collect(func.body, lambda n: isinstance(n, Annotate) and n.key == AnnotationKey.REQUIRES_ARCH):
        need = a.value
        if target.sm < need.sm:
            raise TilecraftError(
                f"{need.construct} is {need.what}, which needs an {need.arch} (Blackwell) GPU or newer; the "
                f"target {target.arch} has none", a.span,
                hint="the CPU target runs it (target='cpu', or TILECRAFT_RUN_ON_CPU=1 for a whole program)")
        if not need.cuda_path:
            raise TilecraftError(
                f"{need.construct} is {need.what} ({need.arch}); tilecraft's CUDA backend has no lowering for it "
                f"yet (target {target.arch})", a.span,
                hint="the CPU target runs it (target='cpu', or TILECRAFT_RUN_ON_CPU=1 for a whole program)")

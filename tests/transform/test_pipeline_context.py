"""The pass context and the checks between passes (transform/pipeline.py): options reach the passes
through the context only, the dump hook sees every pass, and a broken invariant is named."""
from __future__ import annotations

import pytest

from tilecraft.errors import InternalCompilerError
from tilecraft.ir.func import PrimFunc
from tilecraft.kernels.gemm import matmul
from tilecraft.target import Target
from tilecraft.transform import invariants as inv
from tilecraft.transform import pipeline as P
from tilecraft.transform.cuda_pipeline import CUDA_PIPELINE
from tilecraft.transform.plan_shared_memory import plan_shared_memory

SM80 = Target.resolve({"kind": "cuda", "arch": "sm_80"})


def test_dump_hook_sees_every_pass_in_order_and_options_change_the_result():
    seen = []
    out = P.run_pipeline(matmul.get_tir(256, 256, 256), SM80, {"tc.mbarrier_pipeline": True},
                         dump=lambda name, f: seen.append((name, f.lowering.plan_notes)))
    assert [n for n, _ in seen] == [p.__name__ for p in CUDA_PIPELINE]
    assert any("per-stage mbarriers" in note for note in out.lowering.plan_notes)
    plain = P.run_pipeline(matmul.get_tir(256, 256, 256), SM80)
    assert not any("per-stage mbarriers" in note for note in plain.lowering.plan_notes)
    assert not hasattr(PrimFunc, "with_attr")     # options never ride on the function


def test_invariants_name_what_is_broken():
    func = matmul.get_tir(256, 256, 256)
    assert "a tile operation is left (Fill at gemm.py:" in inv.no_tile_ops(func)   # T.clear, the first
    assert inv.plans_built(func) == ""
    ctx = P.PassContext(SM80)
    for p in CUDA_PIPELINE[:CUDA_PIPELINE.index(plan_shared_memory)]:   # the passes before it
        func = p(func, ctx)
    assert "has no offset in dynamic shared memory" in inv.shared_buffers_placed(func)


def test_a_pass_that_breaks_an_invariant_is_named(monkeypatch):
    import tilecraft.transform.cuda_pipeline as C
    monkeypatch.setitem(C.CUDA_INVARIANTS, C.lower_cuda, (lambda f: "made up",))   # a check that always fails
    with pytest.raises(InternalCompilerError, match="after lower_cuda: made up"):
        P.run_pipeline(matmul.get_tir(256, 256, 256), SM80)
    assert P.run_pipeline(matmul.get_tir(256, 256, 256), SM80, check=False) is not None

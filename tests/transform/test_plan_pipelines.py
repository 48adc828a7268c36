"""plan_pipelines at the plan level: a program in, each pipelined loop's plan (ir/loop_plan.py) out.

The passes run up to and including plan_pipelines (no rewrite, no code generation); the plans are
read off the loops.  The rewrites from these plans are checked in tests/cuda (generated CUDA, SASS)."""
from __future__ import annotations

import pytest

from tilecraft.compiler.build import effective_pass_configs
from tilecraft.ir import For, collect
from tilecraft.ir.loop_plan import CpAsync, CpSync, Persistent, Tma, WarpSpecialized, WgmmaAsync
from tilecraft.kernels import attention
from tilecraft.kernels.gemm import matmul
from tilecraft.options import as_options
from tilecraft.registry import Registry, RegistryError
from tilecraft.target import Target
from tilecraft.transform.cuda_pipeline import CUDA_PIPELINE
from tilecraft.transform.pipeline import PassContext
from tilecraft.transform.pipelining import BUILDERS
from tilecraft.transform.plan_pipelines import plan_pipelines

SM80 = Target.resolve({"kind": "cuda", "arch": "sm_80"})
SM90 = Target.resolve({"kind": "cuda", "arch": "sm_90a"})


def plans(func, target, configs=None, defaults=True):
    """The plans of the function's loops after plan_pipelines, and its plan notes."""
    opts = effective_pass_configs(configs, target) if defaults else configs or {}
    ctx = PassContext(target, as_options(opts))
    for p in CUDA_PIPELINE[:CUDA_PIPELINE.index(plan_pipelines) + 1]:
        func = p(func, ctx)
    loops = collect(func.body, lambda n: isinstance(n, For) and n.plan is not None)
    return [f.plan for f in loops], func.lowering.plan_notes


def test_sm80_gemm_waits_inside_its_mma_gemm():
    (plan,), notes = plans(matmul.get_tir(512, 512, 512, block_K=32, num_stages=3), SM80)
    assert plan == CpAsync(3, CpSync.GEMM_HOOK)
    assert notes[-1].endswith("T.Pipelined, " + plan.describe())


def test_mbarrier_option_and_a_body_of_more_than_a_gemm():
    (plan,), _ = plans(matmul.get_tir(512, 512, 512, num_stages=3), SM80, {"tc.mbarrier_pipeline": True})
    assert plan.sync is CpSync.MBARRIER
    flash = attention.flash_attention.get_tir(1, 2, 512, 64, is_causal=False, block_M=64, block_N=64, num_stages=2)
    (plan,), _ = plans(flash, SM80)
    assert plan == CpAsync(2, CpSync.BLOCK)


def test_sm90_readme_tile_splits_as_two_blocks_with_a_deeper_ring():
    (plan,), notes = plans(matmul.get_tir(4096, 4096, 4096, 128, 128, 32, num_stages=3, threads=128), SM90)
    assert isinstance(plan, WarpSpecialized) and plan.tma.wgmma
    assert (plan.blocks, plan.asked, plan.stages, plan.budgets) == (2, 3, 4, (24, 232))
    assert len(plan.tma.loads) == 2 and not plan.overlap
    assert "two blocks per SM" in notes[-1]


def test_sm90_vetoes_are_resolved_in_the_plan():
    func = matmul.get_tir(8192, 8192, 8192, 128, 256, 64, num_stages=3, threads=256)   # 128 k-tiles: no walk
    (plan,), notes = plans(func, SM90, {"tl.disable_tma_lower": True})
    assert plan == WgmmaAsync(3)                      # no TMA: cp.async copies feed the async wgmma
    (plan,), notes = plans(func, SM90, {"tl.disable_warp_specialized": True, "tc.warp_specialize": True})
    assert isinstance(plan, Tma) and plan.wgmma and plan.refusals == ("",)
    (plan,), notes = plans(func, SM90)                # auto: 128x256 runs faster unsplit
    assert isinstance(plan, Tma) and "no producer warpgroup" in plan.refusals[0]
    (plan,), _ = plans(func, SM90, {"tc.warp_specialize": True})
    assert isinstance(plan, WarpSpecialized) and plan.blocks == 1 and plan.budgets == (24, 240)


def test_sm90_short_main_loop_over_many_waves_walks_its_tiles():
    (plan,), notes = plans(matmul.get_tir(8192, 8192, 2048, 128, 256, 64, num_stages=3, threads=256), SM90)
    assert isinstance(plan, Persistent)
    assert (plan.walk.blocks, plan.walk.tiles, plan.walk.n) == (132, 2048, 32)
    assert "persistent: 132 blocks walk the 2048 tiles" in notes[-1]


def test_flash_attention_forced_split_overlaps_its_gemms_on_two_rings():
    flash = attention.flash_attention.get_tir(1, 2, 1024, 128, is_causal=False, block_M=128, block_N=64,
                                              num_stages=2)
    (plan,), _ = plans(flash, SM90, {"tc.warp_specialize": True})
    assert isinstance(plan, WarpSpecialized) and plan.overlap and not plan.tma.wgmma
    assert plan.rings == ((0,), (1,))          # K on the first gemm's ring, V on the second's
    (plan,), _ = plans(flash, SM90, {"tc.warp_specialize": True, "tc.overlap_gemms": False})
    assert isinstance(plan, WarpSpecialized) and not plan.overlap


def test_one_builder_per_plan_class_and_duplicates_refused():
    assert set(BUILDERS.keys()) == {CpAsync, WgmmaAsync, Tma, WarpSpecialized, Persistent}
    with pytest.raises(RegistryError, match="already registered"):
        BUILDERS.register(Tma)(lambda lp, plan, ctx: None)
    r = Registry("thing")
    with pytest.raises(RegistryError, match="no thing is registered for int"):
        r.lookup(int)

"""The fuzzer's `chain` kind (two gemms in a row, FlashAttention's shape) reaches both Hopper
combinations that met on one shared tile when a wrong dK was found (2026-11-30): wgmma beside an
mma.sync gemm, and wgmma with A from registers; and the `stages` kind crosses a grid-wide boundary
(a second T.Kernel, T.sync_grid) both ways.  Each program matches torch on the CPU target."""
from __future__ import annotations

import collections
import random

import pytest

import tilecraft as tl
from tilecraft.testing.fuzz_gen import random_spec
from tilecraft.testing.fuzz_run import Program, run_and_compare


@pytest.mark.cuda_compile
def test_chain_programs_cover_both_hopper_combinations(tmp_path):
    paths = collections.Counter()
    for idx in range(16):
        spec = random_spec(random.Random(f"chain-test:{idx}"), f"fzc_{idx}", kind="chain")
        p = Program(7, idx, str(tmp_path), spec=spec)
        assert p.func is not None, p.error
        assert not run_and_compare(tl.compile(p.func, target="cpu"), p.mod, p.data_seed, device="cpu")
        plan = tl.compile(p.func, target={"kind": "cuda", "arch": "sm_90a"}).get_plan()
        paths["mixed" if "mma.sync" in plan else "rs" if "A from registers" in plan else "other"] += 1
    assert paths["mixed"] and paths["rs"], paths


@pytest.mark.cuda_compile
def test_stages_programs_cross_a_grid_boundary_both_ways(tmp_path):
    """The `stages` kind: a second T.Kernel or T.sync_grid(), with and without a flat view; each
    matches torch on the CPU target and compiles to two kernels for sm_90a."""
    forms = set()
    for idx in range(12):
        spec = random_spec(random.Random(f"stages-test:{idx}"), f"fzs_{idx}", kind="stages")
        p = Program(8, idx, str(tmp_path), spec=spec)
        assert p.func is not None, p.error
        assert not run_and_compare(tl.compile(p.func, target="cpu"), p.mod, p.data_seed, device="cpu")
        src = tl.compile(p.func, target={"kind": "cuda", "arch": "sm_90a"}).get_kernel_source()
        assert src.count('extern "C" __global__') == 2
        forms.add((spec["form"], spec["view"]))
    assert {f for f, _ in forms} == {"kernels", "grid_sync"} and {v for _, v in forms} == {True, False}, forms


@pytest.mark.cuda_compile
def test_multi_kernel_programs_build_in_a_batch(tmp_path):
    """The batched CUDA build keeps a program of two kernels whole: both parts in the batch's cubin,
    launched in order by the kernel the GPU run makes (a SequenceLauncher over the same cubin)."""
    from tilecraft.runtime.cuda_launch import SequenceLauncher
    from tilecraft.testing.fuzz_build import CUDA_VARIANTS, compile_cuda_batch
    progs = [Program(9, i, str(tmp_path), spec=random_spec(random.Random(f"stages-batch:{i}"), f"fzb_{i}",
                                                         kind="stages")) for i in range(3)]
    for variant in CUDA_VARIANTS[:2]:
        built = compile_cuda_batch([(p.name, p.func) for p in progs], variant, kernels=True)
        for p in progs:
            k = built[p.name].kernel
            assert k is not None and k is not True, (p.name, built[p.name].failed, built[p.name].refused)
            assert isinstance(k._launch, SequenceLauncher) and len(k._launch.launchers) == 2
            assert [la.kernel_name for la in k._launch.launchers] == [f"{p.name}_0_kernel", f"{p.name}_1_kernel"]

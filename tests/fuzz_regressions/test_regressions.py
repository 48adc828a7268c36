"""Every program the differential fuzzer found failing, shrunk to a minimal one (fz_*.py here),
checked on every target from now on: the CPU target against torch, a compile for each CUDA
variant (no GPU needed), and a run on the GPU under each variant it can run (marker `gpu`).

A saved program names the command that found it and how it failed in its header.
"""
from __future__ import annotations

import glob
import os

import pytest

from tilecraft.testing.fuzz_build import CUDA_VARIANTS, build_cpu, build_gpu, compile_cuda_batch
from tilecraft.testing.fuzz_run import load_module, run_and_compare

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = sorted(glob.glob(os.path.join(HERE, "fz_*.py")))
IDS = [os.path.basename(p)[:-3] for p in PROGRAMS]


def _load(path):
    mod = load_module(path)
    return mod, getattr(mod, "FZ_DATA_SEED", 0)


@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_cpu_matches_torch(path, tmp_path):
    mod, seed = _load(path)
    out = build_cpu([(mod.FZ_FUNC.name, mod.FZ_FUNC)], str(tmp_path))[mod.FZ_FUNC.name]
    assert out.kernel is not None, out.failed or out.refused
    assert run_and_compare(out.kernel, mod, seed) == ""


@pytest.mark.cuda_compile
@pytest.mark.parametrize("variant", CUDA_VARIANTS, ids=[v[0] for v in CUDA_VARIANTS])
@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_compiles_for_cuda(path, variant):
    mod, _ = _load(path)
    out = compile_cuda_batch([(mod.FZ_FUNC.name, mod.FZ_FUNC)], variant)[mod.FZ_FUNC.name]
    assert not out.failed, out.failed


@pytest.mark.gpu
@pytest.mark.parametrize("variant", CUDA_VARIANTS, ids=[v[0] for v in CUDA_VARIANTS])
@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_gpu_matches_torch(path, variant):
    from tilecraft.testing.fuzz import gpu_variants
    runnable = {v[0]: v for v in gpu_variants()}   # each variant compiled for what this GPU loads
    if variant[0] not in runnable:
        pytest.skip(f"{variant[0]} code does not run on this GPU")
    variant = runnable[variant[0]]
    mod, seed = _load(path)
    out = build_gpu(mod.FZ_FUNC, variant)
    assert not out.failed, out.failed
    if out.kernel is None:
        pytest.skip(f"refused with a clear error on {variant[0]}: {out.refused}")
    assert run_and_compare(out.kernel, mod, seed, device="cuda") == ""

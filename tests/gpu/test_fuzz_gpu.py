"""The differential fuzzer in the GPU tier: 2,000 fuzzed programs (fixed seeds) run on the GPU
under every CUDA variant the GPU can run (sm_80 code; on an H200 also sm_90a, async wgmma + TMA,
mbarriers) and compared with their torch expressions.  A failure names the program and the
command that reproduces, shrinks and saves it:
`python -m tilecraft.testing.fuzz --seed S --only I --target cuda`.  Not yet run on hardware
when written.
"""
from __future__ import annotations

import pytest

from tilecraft.testing.fuzz import Program, gpu_variants
from tilecraft.testing.fuzz_build import compile_cuda_batch
from tilecraft.testing.fuzz_run import run_and_compare

pytestmark = pytest.mark.gpu
SEEDS = tuple(range(2001, 2021))   # 20 x 100 = 2,000 programs
PER_SEED = 100


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzzed_programs_on_the_gpu_match_torch(seed, tmp_path):
    progs = [Program(seed, i, str(tmp_path)) for i in range(PER_SEED)]
    unparsed = [f"{p.name}: {p.error}" for p in progs if p.func is None]
    assert not unparsed, "\n".join(unparsed)
    bad = []
    for variant in gpu_variants():
        some = [p for p in progs if not variant[2] or p.spec["kind"] == "gemm"]
        built = compile_cuda_batch([(p.name, p.func) for p in some], variant, kernels=True)
        for p in some:
            out = built[p.name]
            why = out.failed if out.kernel is None else run_and_compare(out.kernel, p.mod, p.data_seed, device="cuda")
            if why:
                bad.append(f"{p.name} ({p.spec['kind']}) on {variant[0]}: {why.splitlines()[0][:300]}\n"
                           f"    python -m tilecraft.testing.fuzz --seed {p.seed} --only {p.index} --target cuda")
    assert not bad, f"{len(bad)} failure(s):\n" + "\n".join(bad)

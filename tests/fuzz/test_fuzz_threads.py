"""Fuzzed programs through the CUDA lowering, run on the CPU: the CPU target's thread-level mode
(`tc.cpu_threads`) lowers a program the way the CUDA target does -- per-thread registers, vector copies,
the ragged-edge predicates -- and runs it with the block's threads emulated, its shared memory starting
undefined (NaN bytes) as on a GPU.  So a CUDA-lowering bug that gives wrong numbers shows here, without a
GPU: the converting copy that skipped the vectors past a tensor's edge (found on the H200 by the GPU fuzz
tier, seeds 2006 / 2008 / 2018) fails this test on the code before its fix (2008 and 2018)."""
from __future__ import annotations

import pytest

from tilecraft.testing.fuzz_build import build_cpu
from tilecraft.testing.fuzz_run import Program, run_and_compare

THREADS = {"tc.cpu_threads": True}
# (seed, programs): two of the H200's findings among them (the old code fails both here), and a fresh seed
SAMPLES = [(2008, range(0, 8)), (2018, range(40, 48)), (1005, range(0, 24))]


@pytest.mark.cxx
@pytest.mark.parametrize("seed, indices", SAMPLES, ids=[str(s) for s, _ in SAMPLES])
def test_fuzzed_programs_through_the_cuda_lowering_on_the_cpu_match_torch(tmp_path, seed, indices):
    progs = [Program(seed, i, str(tmp_path)) for i in indices]
    assert all(p.func is not None for p in progs), [p.error for p in progs if p.func is None]
    built = build_cpu([(p.name, p.func) for p in progs], str(tmp_path), THREADS)
    bad = []
    for p in progs:
        out = built[p.name]
        if out.kernel is None:
            bad.append(f"{p.name} ({p.spec['kind']}): {out.failed or out.refused}"[:400])
            continue
        why = run_and_compare(out.kernel, p.mod, p.data_seed)
        if why:
            bad.append(f"{p.name} ({p.spec['kind']}): {why}"[:400])
    assert not bad, "\n".join(bad)

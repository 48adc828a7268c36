"""The differential fuzzer in CI: 320 fuzzed programs with fixed seeds, each run on the CPU target
and compared with its torch expression, and compiled for sm_80 and sm_90a (NVRTC, no GPU); the
GEMM programs of two seeds (the Hopper pass configs change GEMM loops only) also under the
async-wgmma + TMA and the mbarrier pipelines.  About 70 s beside the rest of `make test` on an idle
2-core machine; compiles are batched, 24 programs a compiler run (tilecraft/testing/fuzz_build.py;
tests/fuzz/test_fuzz_tools.py checks that a CPU batch builds as one library: a failed batch falls
back to one compile a program, which passes too, only 3x slower).  A failure names the program and
the command that reproduces it alone:
`python -m tilecraft.testing.fuzz --seed S --only I` (which also shrinks it and saves it under
tests/fuzz_regressions/).  The GPU tier runs the same programs on the GPU
(tests/gpu/test_fuzz_gpu.py); bigger runs use the command line.
"""
from __future__ import annotations

import pytest

from tilecraft.testing.fuzz import Program
from tilecraft.testing.fuzz_build import CUDA_VARIANTS, build_cpu, compile_cuda_batch
from tilecraft.testing.fuzz_run import expected_of, inputs_of, run_and_compare

SEEDS = (1001, 1002, 1003, 1004)
PER_SEED = 80


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """seed -> the seed's PER_SEED programs, written out and parsed once for every test here."""
    work = str(tmp_path_factory.mktemp("fuzz"))
    return {s: [Program(s, i, work) for i in range(PER_SEED)] for s in SEEDS}, work


def _where(p) -> str:
    return f"{p.name} ({p.spec['kind']}): python -m tilecraft.testing.fuzz --seed {p.seed} --only {p.index}"


def _parsed(progs):
    bad = [f"{_where(p)}: {p.error}" for p in progs if p.func is None]
    assert not bad, "valid fuzzed programs did not parse:\n" + "\n".join(bad)
    return [(p.name, p.func) for p in progs]


@pytest.mark.cxx
@pytest.mark.parametrize("seed", SEEDS)
def test_fuzzed_programs_on_the_cpu_match_torch(programs, seed):
    progs, work = programs
    progs = progs[seed]
    built = build_cpu(_parsed(progs), work)
    bad = []
    for p in progs:
        out = built[p.name]
        if out.kernel is None:
            bad.append(f"{_where(p)}: {out.failed or 'refused: ' + out.refused}")
            continue
        why = run_and_compare(out.kernel, p.mod, p.data_seed, expected=expected_of(p.mod, inputs_of(p.mod, p.data_seed)))
        if why:
            bad.append(f"{_where(p)}: {why}")
    assert not bad, f"{len(bad)} of {len(progs)} programs differ from torch:\n" + "\n".join(bad)


# every seed for sm_80 and sm_90a; two seeds for the Hopper pipeline variants (CI time)
COMPILES = [pytest.param(seed, v, id=f"{seed}-{v[0]}") for seed in SEEDS for v in CUDA_VARIANTS
            if not v[2] or seed in SEEDS[:2]]


@pytest.mark.cuda_compile
@pytest.mark.parametrize("seed,variant", COMPILES)
def test_fuzzed_programs_compile_for_cuda(programs, seed, variant):
    progs, _ = programs
    progs = progs[seed]
    if variant[2]:   # the Hopper pipeline configs change pipelined GEMM loops only
        progs = [p for p in progs if p.spec["kind"] == "gemm"]
    res = compile_cuda_batch(_parsed(progs), variant)
    bad = [f"{_where(p)}: {res[p.name].failed}" for p in progs if res[p.name].failed]
    assert not bad, f"{len(bad)} of {len(progs)} programs do not compile for {variant[0]}:\n" + "\n".join(bad)

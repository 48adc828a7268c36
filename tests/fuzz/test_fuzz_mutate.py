"""The fuzzer's mutation mode in CI (tilecraft/testing/fuzz_mutate.py): 216 mutated programs of a fixed
seed, each either refused with a TilecraftError at its mutated line or (a valid variant) computing the
original program's torch reference on the CPU target, and compiled for sm_80 and sm_90a (NVRTC, no
GPU) -- never a wrong answer, an accepted invalid program, an internal error, a crash or a lowering
over 30 s.  A few minutes on a loaded 2-core machine.  A failure names the mutant and the command
that reproduces it alone: `python -m tilecraft.testing.fuzz --mutate --seed S --only I`.  The
2,000-program run is the command line's (`--count 2000`, results in benchmarks/results/)."""
from __future__ import annotations

import os
import random

import pytest

from tilecraft.errors import TilecraftError
from tilecraft.ir.node import Span
from tilecraft.testing.fuzz_gen import random_spec, render
from tilecraft.testing.fuzz_mutate import (FAILURES, MUTATIONS, Kernel, Mutant, MutantProgram, classify_error,
                                           mutate, run_mutants)

SEED = 7
COUNT = 216


@pytest.mark.cxx
@pytest.mark.cuda_compile
def test_mutated_programs_are_refused_at_their_line_or_compute_the_reference(tmp_path):
    report = run_mutants(SEED, list(range(COUNT)), str(tmp_path), jobs=min(2, os.cpu_count() or 1))
    bad = [f"{name} on {tgt} ({mutation}): {outcome}: {why}\n  reproduce: python -m tilecraft.testing.fuzz "
           f"--mutate --seed {s} --only {i}" for tgt, (s, i, name), mutation, outcome, why in report.failures]
    assert not bad, f"{len(bad)} failure(s):\n" + "\n".join(bad[:30]) + "\n" + report.table()
    tot = report.totals()
    assert report.programs == COUNT
    assert sum(tot.values()) == 3 * COUNT          # the CPU target, sm_80 and sm_90a for every mutant
    # both expectations are exercised: most mutants are invalid, some are valid variants that ran
    assert tot["refused at line"] > COUNT and tot["valid and correct"] > 20, report.table()


def test_every_mutation_applies_to_some_program():
    """Each mutation finds lines to rewrite in the fuzzer's programs (none is dead code), and every
    mutant names a line inside the kernel and changes it."""
    hits = dict.fromkeys(m.__name__ for m in MUTATIONS)
    for i in range(150):
        src = render(random_spec(random.Random(f"mut:{i}"), f"fz_{i}"))
        k = Kernel(src)
        for mut in MUTATIONS:
            for m in mut(k, random.Random(i)):
                assert k.start <= m.index < k.end, (mut.__name__, m.index)
                assert m.text != k.lines[m.index], (mut.__name__, m.text)
                assert m.expect in ("refuse", "same")
                hits[mut.__name__] = (hits[mut.__name__] or 0) + 1
    assert all(hits.values()), [n for n, c in hits.items() if not c]


def test_mutants_are_seed_deterministic(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = MutantProgram(3, 5, str(tmp_path / "a")), MutantProgram(3, 5, str(tmp_path / "b"))
    assert open(a.path).read() == open(b.path).read()
    assert (a.mutant.name, a.mutant.index) == (b.mutant.name, b.mutant.index)


def test_a_refusal_counts_only_at_the_mutated_line():
    m = Mutant("test", 9, "x", "refuse")   # line 10
    here = "/tmp/fzm_0_0.py"
    assert classify_error(TilecraftError("bad", Span(here, 10)), m, here)[0] == "refused at line"
    assert classify_error(TilecraftError("bad", Span(here, 11)), m, here)[0] == "refused elsewhere"
    assert classify_error(TilecraftError("bad", Span("/tmp/other.py", 10)), m, here)[0] == "refused elsewhere"
    assert classify_error(TilecraftError("bad"), m, here)[0] == "refused elsewhere"   # no line at all
    assert classify_error(ValueError("oops"), m, here)[0] == "internal"
    assert set(FAILURES) >= {"refused elsewhere", "wrong", "internal", "over 30 s", "crash"}


@pytest.mark.cxx
@pytest.mark.parametrize("seed,index", [(17, 110), (18, 42)])
def test_a_loop_count_read_from_an_integer_tensor_is_valid_so_its_mutant_reads_a_float(seed, index, tmp_path):
    """Seeds 17 and 18 (session 14) mutated a T.unroll / T.serial count into an element of an int32
    tensor and expected a refusal; such a data-dependent count is valid (as TileLang's block-sparse
    loops are) and ran.  The mutation now reads a float (element * 0.5), which is refused at its line."""
    import torch
    import tilecraft
    import tilecraft.language as T

    p = MutantProgram(seed, index, str(tmp_path))
    assert p.mutant.expect == "refuse" and p.mutant.text.rstrip().endswith("* 0.5):"), p.mutant.text
    report = run_mutants(seed, [index], str(tmp_path / "run"), jobs=1, cuda=False)
    assert not report.failures and report.totals()["refused at line"] == 1, report.table()

    @T.prim_func
    def counted(C: T.Tensor((1,), "int32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            acc = T.alloc_fragment((64,), "float32")
            T.fill(acc, 0.0)
            for t in T.serial(C[0]):
                for i in T.Parallel(64):
                    acc[i] = acc[i] + T.cast(t + 1, "float32")
            T.copy(acc, Y[0])

    k = tilecraft.compile(counted, target="cpu")
    for n in (0, 1, 5):
        y = torch.zeros(64)
        k(torch.tensor([n], dtype=torch.int32), y)
        assert torch.equal(y, torch.full((64,), float(n * (n + 1) // 2))), (n, y[:4])

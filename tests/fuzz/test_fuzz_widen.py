"""widen_k_tiles against the fuzzer's GEMMs, on the CPU target: every generated GEMM program whose
pipelined loop the sm_90a pass widens must compute exactly what the program as written computes
(same inputs, bit for bit: the same products summed in the same k order), ragged sizes, transposes,
dynamic M, 16- and 32-wide k-tiles included.  The GPU runs the widened programs in the fuzz tier, and the
ones split as two blocks per SM instead (the last test counts them)."""
from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

import tilecraft as tilelang  # noqa: E402
from tilecraft.compiler.build import effective_pass_configs  # noqa: E402
from tilecraft.target import Target  # noqa: E402
from tilecraft.testing.fuzz_gen import random_spec  # noqa: E402
from tilecraft.testing.fuzz_render import render  # noqa: E402
from tilecraft.testing.fuzz_run import inputs_of, load_module  # noqa: E402
from tilecraft.transform.pipeline import PassContext  # noqa: E402
from tilecraft.transform.widen_k_tiles import widen_k_tiles  # noqa: E402

SM90 = Target.resolve({"kind": "cuda", "arch": "sm_90a"})


def _run_cpu(func, inputs, outputs):
    args = [t.clone() for t in inputs]
    tilelang.compile(func, target="cpu")(*args)
    return [args[i] for i in outputs]


def test_widened_fuzz_gemms_match_the_programs_as_written(tmp_path):
    rng = random.Random(20261201)
    widened = compared = 0
    for n in range(400):
        spec = random_spec(rng, f"fzw_{n}", kind="gemm")
        path = tmp_path / f"fzw_{n}.py"
        path.write_text(render(spec))
        mod = load_module(str(path))
        func = mod.FZ_FUNC
        wide = widen_k_tiles(func, PassContext(SM90, effective_pass_configs(None, SM90)))
        if wide.body is func.body:  # not widened
            continue
        widened += 1
        if widened > 24:  # enough CPU compiles for CI; the count above still covers the selection
            continue
        inputs = inputs_of(mod, n)
        got = _run_cpu(wide.with_lowering(plan_notes=()), inputs, mod.FZ_OUTPUTS)
        want = _run_cpu(func, inputs, mod.FZ_OUTPUTS)
        for g, w in zip(got, want):
            assert torch.equal(g, w), (spec, (g.float() - w.float()).abs().max())
        compared += 1
    print(f"widened {widened} of 400 fuzzed GEMMs, compared {compared}")
    assert compared >= 10, f"only {widened} of 400 fuzzed GEMMs were widened"


def test_the_fuzzer_makes_programs_the_two_block_split_takes(tmp_path):
    """A quarter of the fuzzer's tensor-core GEMMs have the README's tile (128x128, one warpgroup), so the
    GPU fuzz tier runs the sm_90a split as two blocks per SM (transform/pipelining/warp_specialized.py): among 400
    fuzzed GEMMs, count those whose sm_90a plan (the target's defaults, passes only) says so."""
    from tilecraft.transform.pipeline import run_pipeline
    rng = random.Random(20261202)
    split = 0
    for n in range(400):
        spec = random_spec(rng, f"fzs_{n}", kind="gemm")
        if (spec.get("bm"), spec.get("bn"), spec["threads"]) != (128, 128, 128):
            continue
        path = tmp_path / f"fzs_{n}.py"
        path.write_text(render(spec))
        func = load_module(str(path)).FZ_FUNC
        lowered = run_pipeline(func, SM90, effective_pass_configs(None, SM90))
        split += any("two blocks per SM" in note for note in lowered.lowering.plan_notes)
    print(f"{split} of 400 fuzzed GEMMs split as two blocks per SM on sm_90a")
    assert split >= 10, split

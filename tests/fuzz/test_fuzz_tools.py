"""The fuzzer's own machinery: reproducible programs, a shrinker that really shrinks, and a
mismatch check that really fails."""
from __future__ import annotations

import json
import random

import torch

import tilecraft.testing.fuzz_ref as fuzz_ref
from tilecraft.testing.fuzz import main
from tilecraft.target import Target
from tilecraft.testing.fuzz_build import build_cpu, compile_batches, cpu_meta, lower_all
from tilecraft.testing.fuzz_gen import NAMES, random_spec, render
from tilecraft.testing.fuzz_run import Program, load_module, mismatch, run_and_compare
from tilecraft.testing.fuzz_shrink import PLAIN_NAMES


def test_a_seed_and_index_give_the_same_program_every_time():
    a = render(random_spec(random.Random("7:3"), "fz_7_3"))
    b = render(random_spec(random.Random("7:3"), "fz_7_3"))
    c = render(random_spec(random.Random("7:4"), "fz_7_3"))
    assert a == b and a != c


def test_names_come_from_a_pool_of_names_c_cuda_and_the_printers_use():
    for name in ("k", "n", "i1", "tid", "int", "tc_tid", "threadIdx"):
        assert name in NAMES
    kinds = {random_spec(random.Random(f"1:{i}"), "x")["kind"] for i in range(60)}
    assert kinds == {"ewise", "reduce", "rowwise", "cumsum", "copy", "gemm", "atomic", "chain", "stages"}


def test_tolerances_catch_a_one_ulp_int_error_and_pass_float_rounding():
    want = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    got = want.clone()
    assert mismatch(got, want, "int32") == ""
    got[1, 2] += 1
    assert "1 of 12 elements differ" in mismatch(got, want, "int32")
    x = torch.randn(64)
    assert mismatch(x.half().float(), x, "float16") == ""
    assert mismatch(x.half().float(), x, "float32") != ""   # fp16 rounding is not fp32-accurate


def test_a_wrong_reference_is_found_shrunk_and_saved(tmp_path, monkeypatch):
    """Break the reference of the reductions: the run fails (exit 1), and the program saved is
    smaller than the one generated, fails the same way, and names the command that found it."""
    seed = 5
    index = next(i for i in range(200) if random_spec(random.Random(f"5:{i}"), "x")["kind"] == "reduce")
    right = fuzz_ref.reduce
    monkeypatch.setattr(fuzz_ref, "reduce", lambda kind, x, dim: right(kind, x, dim) + 1)
    assert main(["--seed", str(seed), "--only", str(index), "--target", "cpu-only", "--shrink-tries", "10",
                 "--save-dir", str(tmp_path / "saved")]) == 1
    saved = tmp_path / "saved" / f"fz_{seed}_{index}.py"
    text = saved.read_text()
    assert f"--seed {seed} --only {index}" in text and "Failed on cpu: CPU vs torch" in text
    mod = load_module(str(saved))
    big = random_spec(random.Random(f"{seed}:{index}"), "x")
    small = json.loads(mod.FZ_SPEC)
    assert small["names"] == PLAIN_NAMES and small["M"] * small["N"] <= big["M"] * big["N"]
    out = build_cpu([(mod.FZ_FUNC.name, mod.FZ_FUNC)], str(tmp_path))[mod.FZ_FUNC.name]
    assert run_and_compare(out.kernel, mod, mod.FZ_DATA_SEED) != ""


def test_an_integer_meeting_a_float_computes_in_the_float():
    # fz_1_8323 (H200 run of 10,000, 2026-11-30): `lj - r * lj` truncated the inexact row sum product
    # to int32, so a one-ulp difference in the sum's order became an integer off by one on every target
    from tilecraft.testing.fuzz_expr import Printer
    p = Printer({"r": ("r", "r", "float32"), "lj": ("j", "lj", "index")})
    for e in (["sub", ["leaf", "lj"], ["mul", ["leaf", "r"], ["leaf", "lj"]]],
              ["ite", ["gtc", "r", 0.5], ["leaf", "lj"], ["leaf", "r"]]):
        k, t, d = p.print(e)
        assert d == "float32" and "int32" not in k and "torch.int32" not in t, (k, t)


def test_cpu_programs_compile_in_one_library_per_batch(tmp_path):
    """The CPU tier compiles its programs a batch per g++ run; a batch that fails falls back to one
    compile a program, which passes too and hid that every batch failed once the programs exported
    `tc_error_text` (the export is renamed per program, like the entry, and the meta names both)."""
    import ctypes
    progs = [Program(1001, i, str(tmp_path)) for i in range(8)]
    funcs = [(p.name, p.func) for p in progs if p.func is not None]
    _, lowered = lower_all(funcs, Target.resolve("cpu"), {})
    built = compile_batches("cpu", lowered, "fuzz", {})
    alone = {n: str(b)[:300] if not ok else "compiled alone" for n, (ok, b, pos) in built.items() if not ok or pos is None}
    assert built and not alone, alone
    lib_path = tmp_path / "batch.so"
    lib_path.write_bytes(next(iter(built.values()))[1])
    lib = ctypes.CDLL(str(lib_path))
    exports = [n for n in lowered if "tc_error_text(" in lowered[n][0]]
    assert exports, "no program of the batch exports tc_error_text: pick programs that do"
    for n in exports:
        meta = cpu_meta(built[n][2])
        assert hasattr(lib, meta["entry"]) and hasattr(lib, meta["error_text"]), (n, meta)

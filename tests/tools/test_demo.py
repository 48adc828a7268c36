"""`tilecraft demo` on the CPU target: every timed row names the torch reference it divides by (the
fastest torch spelling, timed in the same run), the correctness check is against an fp32
reference that is never timed, and a slower kernel is called slower."""
from __future__ import annotations

import time

import pytest

from tilecraft import demo

TORCH_REFS = {"torch.add", "torch.matmul fp16", "torch.matmul fp32 + cast", "addmm fp16 + gelu",
              "addmm fp32 + gelu + cast", "torch.softmax fp16", "torch.softmax fp32 + cast", "F.rms_norm",
              "torch eager rms formula (no F.rms_norm)", "SDPA fp16", "SDPA fp32 + cast"}


def test_demo_rows_name_the_torch_reference_and_check_separately(capsys):
    rows = demo.run("cpu", verbose=True, only=["vector add", "softmax", "rmsnorm", "launch"])
    out = capsys.readouterr().out
    assert [r["kernel"] for r in rows] == ["vector add fp32", "softmax fp16", "RMSNorm bf16"]
    for r in rows:
        assert r["check"].startswith("PASS"), r
        assert r["torch_ref"] in TORCH_REFS and r["torch_ref"] in out
        assert r["speed"] == pytest.approx(r["torch_ms"] / r["ms"])
        assert ("SLOWER" in r["verdict"]) == (r["speed"] < 1.0)
    assert "host time per cached launch" in out and "torch.add" in out


def test_fastest_candidate_is_the_reference():
    def slow():
        time.sleep(0.002)

    def quick():
        pass
    name, ms = demo.fastest([("slow", slow), ("quick", quick)], "cpu")
    assert name == "quick" and ms < 1.0


def test_slower_rows_are_said_in_words():
    assert demo.verdict(2.0) == "2.00x faster"
    assert demo.verdict(0.5).startswith("SLOWER: 0.50x (torch 2.00x faster)")
    rows = [{"kernel": "GEMM fp16", "size": "1", "check": "PASS 1e-5", "compile_s": 0.1, "ms": 2.0,
             "torch_ref": "torch.matmul fp16", "torch_ms": 1.0, "speed": 0.5, "verdict": demo.verdict(0.5),
             "rate": ""}]
    text = demo.format_table(rows, (9.0, 7.0), "cuda")
    assert "slower than torch here: GEMM fp16 (0.50x torch.matmul fp16)" in text
    assert "9.00 us vs torch.add 7.00 us" in text and "SLOWER than torch's" in text


def test_a_pinned_target_reaches_the_library_kernels():
    """`tilecraft demo --target cpu` on a GPU machine: the library kernels (target "auto") compile
    for the pinned target, and their @jit caches keep the two apart."""
    from tilecraft.kernels import elementwise
    from tilecraft.target import Target, default_target
    with default_target("cpu"):
        k = elementwise.vector_add(256)
        assert k.target.kind == "cpu" and Target.resolve("auto").kind == "cpu"
    with default_target({"kind": "cuda", "arch": "sm_90a"}):
        assert Target.resolve("auto").arch == "sm_90a" and elementwise.vector_add(256) is not k

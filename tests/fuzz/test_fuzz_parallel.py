"""The fuzzer's parallel pipeline (tilecraft/testing/fuzz_parallel.py): worker processes give the
same outcomes as one process, the GPU half of a run (main process) compares what the workers sent
back and reports a wrong answer, tensors survive the trip between processes, and a batched
translation unit keeps the wgmma header switches its kernels set."""
from __future__ import annotations

import torch

import tilecraft.testing.fuzz as fuzz
from tilecraft.testing.fuzz_build import _wgmma_defines
from tilecraft.testing.fuzz_report import Report
from tilecraft.testing.fuzz_run import pack, unpack

PAIRS = [(41, i) for i in range(20)]


def _counts(report: Report) -> dict:
    return {key: {c: v for c, v in row.items() if c != "seconds"} for key, row in report.rows.items()}


def test_worker_processes_give_the_outcomes_of_one_process(tmp_path):
    one, two = Report(), Report()
    fuzz.check(PAIRS, "cpu", one, str(tmp_path / "a"), jobs=1, batch=8)
    fuzz.check(PAIRS, "cpu", two, str(tmp_path / "b"), jobs=2, batch=8)
    assert _counts(one) == _counts(two)
    totals = one.totals()
    assert totals["cpu"]["programs"] == len(PAIRS) and totals["cpu"]["compared"] > 0
    assert totals["compile sm_80"]["compared"] > 0 and not one.failures, one.table()


def _simulated_gpu(monkeypatch, wrong: bool):
    """A stand-in for the device: 'running' a kernel fills the outputs with the torch reference
    (plus one when `wrong`), so everything but the launch itself is the real GPU path: the cubins
    and references sent by the workers, the kernels made from them, the comparisons, the report."""
    def run_once(kernel, mod, seed, device="cpu", wait=None):
        assert kernel.target.kind == "cuda" and kernel.artifact.binary, "the worker's cubin reached the kernel"
        args = fuzz.inputs_of(mod, seed)
        for i, t in mod.fz_reference(*[a.clone() for a in args]).items():
            args[i] = t + 1 if wrong else t
        return args, ""
    monkeypatch.setattr(fuzz, "gpu_variants", lambda: (("sm_80", "sm_80", {}),))
    monkeypatch.setattr(fuzz, "run_once", run_once)


def test_the_gpu_half_compares_with_torch_and_the_cpu(tmp_path, monkeypatch):
    _simulated_gpu(monkeypatch, wrong=False)
    report = Report()
    fuzz.check(PAIRS[:8], "cuda", report, str(tmp_path), jobs=1, batch=8)
    row = report.totals()["gpu sm_80"]
    assert row["programs"] == 8 and row["compared"] + row["refused"] == 8 and row["compared"] > 0, report.table()
    # a program whose GPU result equals torch's but not the CPU's would be a "GPU vs CPU" failure;
    # the CPU target agrees with torch within tolerance here, so nothing failed
    assert not [f for f in report.failures if f[0] != "cpu"], report.failures


def test_a_wrong_gpu_answer_is_a_failure_naming_the_program(tmp_path, monkeypatch):
    _simulated_gpu(monkeypatch, wrong=True)
    report = Report()
    fuzz.check(PAIRS[:4], "cuda", report, str(tmp_path), jobs=1, batch=4)
    bad = [f for f in report.failures if f[0] == "gpu sm_80"]
    assert bad and all("GPU vs torch" in why and "elements differ" in why for _, _, why in bad), report.failures
    assert {name for _, (_, _, name), _ in bad} <= {f"fz_41_{i}" for i in range(4)}
    assert report.totals()["gpu sm_80"]["mismatches"] == len(bad)


def test_tensors_cross_processes_as_plain_data():
    for t in (torch.randn(3, 5).to(torch.bfloat16), torch.randint(-8, 9, (7,), dtype=torch.int32),
              torch.randn(4, 2).half().t(), torch.empty(0, 3)):
        back = unpack(pack(t))
        assert back.dtype == t.dtype and back.shape == t.shape and torch.equal(back, t)


def test_a_batch_keeps_the_wgmma_switches_its_kernels_set():
    none, only64, only128, every = ["TC_NO_WGMMA"], ["TC_WGMMA_ONLY", "TC_WGMMA_N64"], \
        ["TC_WGMMA_ONLY", "TC_WGMMA_N128"], []
    assert _wgmma_defines([none, none]) == ["TC_NO_WGMMA"]
    assert _wgmma_defines([none, only128, only64]) == ["TC_WGMMA_ONLY", "TC_WGMMA_N64", "TC_WGMMA_N128"]
    assert _wgmma_defines([only64, every]) == []   # a kernel that needs every shape gets them all


def test_a_lost_cuda_context_stops_the_run_with_the_program_named(tmp_path, monkeypatch):
    """A launch fails and the context cannot synchronize afterwards (here: there is no GPU at all,
    so the check that follows any run failure fails too): the run stops at that task instead of
    reporting thousands of programs that could not run, and names the program."""
    monkeypatch.setattr(fuzz, "gpu_variants", lambda: (("sm_80", "sm_80", {}),))
    monkeypatch.setattr(fuzz, "run_once", lambda *a, **k: (None, "run failed: CudaError: an illegal address"))
    report = Report()
    fuzz.check(PAIRS, "cuda", report, str(tmp_path), jobs=1, batch=4)
    assert report.stopped is not None and "fz_41_" in report.stopped.lost
    assert report.totals()["cpu"]["programs"] == 4, "the run went on after the context was lost"
    assert report.failures[0][0] == "gpu sm_80" and "illegal address" in report.failures[0][2]


def test_max_failures_ends_a_broken_run_early(tmp_path, monkeypatch):
    _simulated_gpu(monkeypatch, wrong=True)
    report = Report()
    fuzz.check(PAIRS[:12], "cuda", report, str(tmp_path), jobs=1, batch=4, max_failures=1)
    assert report.checked == 4 and report.failures, (report.checked, report.table())

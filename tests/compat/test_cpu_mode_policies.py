"""CPU mode's host-timing policies (tilecraft/compat/cpu_mode.py): timings make few calls
(TILECRAFT_CPU_BENCH_REPS) and autotuning checks configs in order until a bounded number pass
(TILECRAFT_CPU_AUTOTUNE_CONFIGS); each says so once on stderr, and outside CPU mode nothing changes."""
from __future__ import annotations

import time

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.autotuner import AutoTuner
from tilecraft.autotuner.result import CPU_MODE_SKIPPED
from tilecraft.compat import cpu_mode
from tilecraft.profiler import TensorSupplyType, do_bench


@pytest.fixture(autouse=True)
def fresh_notes(tmp_path, monkeypatch):
    for name in ("TILECRAFT_CPU_BENCH_REPS", "TILELANG_CPU_BENCH_REPS", "TILECRAFT_CPU_AUTOTUNE_CONFIGS",
                 "TILELANG_CPU_AUTOTUNE_CONFIGS", "TILECRAFT_DISABLE_CACHE", "TILECRAFT_AUTO_TUNING_DISABLE_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILECRAFT_AUTO_TUNING_MAX_CPU_COUNT", "2")
    monkeypatch.setattr(cpu_mode, "_said", set())   # each test sees the once-only notes afresh


class Counter:
    def __init__(self, sleep=0.0):
        self.calls, self.sleep = 0, sleep

    def __call__(self):
        self.calls += 1
        if self.sleep:
            time.sleep(self.sleep)


# ---------------------------------------------------------------------------------------- timings


def test_a_timing_in_cpu_mode_makes_one_warmup_call_and_at_most_the_cap(capfd):
    fn = Counter()
    with cpu_mode.enabled():
        assert do_bench(fn, warmup=1e6, rep=1e6, _n_warmup=50, _n_repeat=200, return_mode="all") is not None
        assert fn.calls == 1 + 10
        fn.calls = 0
        samples = do_bench(fn, warmup=1e6, rep=1e6, return_mode="all")
        assert fn.calls == 1 + 10 and len(samples) == 10
        fn.calls = 0
        assert len(do_bench(fn, rep=1e6, _n_repeat=3, return_mode="all")) == 3   # fewer asked for: fewer
        assert fn.calls == 1 + 3
    err = capfd.readouterr().err
    assert err.count("TILECRAFT_CPU_BENCH_REPS") == 1, err   # said once


def test_a_call_slower_than_the_rep_budget_is_timed_once():
    fn = Counter(sleep=0.02)
    with cpu_mode.enabled():
        samples = do_bench(fn, warmup=25, rep=5, _n_warmup=10, _n_repeat=100, return_mode="all")
    assert fn.calls == 1 and len(samples) == 1 and samples[0] >= 19.0


def test_the_bench_cap_is_a_knob_and_zero_keeps_the_counts_asked_for(monkeypatch):
    fn = Counter()
    with cpu_mode.enabled():
        monkeypatch.setenv("TILECRAFT_CPU_BENCH_REPS", "3")
        do_bench(fn, rep=1e6, _n_warmup=5, _n_repeat=50)
        assert fn.calls == 1 + 3
        monkeypatch.setenv("TILECRAFT_CPU_BENCH_REPS", "0")
        fn.calls = 0
        assert len(do_bench(fn, rep=1e6, _n_warmup=5, _n_repeat=50, return_mode="all")) == 50
        assert fn.calls >= 1 + 5 + 50
        monkeypatch.setenv("TILECRAFT_CPU_BENCH_REPS", "-1")
        with pytest.raises(ValueError, match="TILECRAFT_CPU_BENCH_REPS"):
            do_bench(fn, rep=1)


def test_outside_cpu_mode_timings_keep_their_counts():
    assert not cpu_mode.active()
    fn = Counter()
    assert len(do_bench(fn, rep=1e6, _n_warmup=5, _n_repeat=50, backend="cpu", return_mode="all")) == 50
    assert fn.calls >= 1 + 5 + 50


# ------------------------------------------------------------------------------------- autotuning

M = N = 64


def scale_program(M, N, block_M=32, block_N=32, factor=2.0, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], A_s)
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = A_s[i, j] * factor

    return main


scale = tilecraft.jit(out_idx=[-1], target="cuda")(scale_program)

CONFIGS = [
    {"block_M": 32, "block_N": 32, "dtype": "float13"},   # compile error
    {"block_M": 32, "block_N": 32, "factor": 3.0},       # wrong answers
    {"block_M": 16, "block_N": 64},                      # the first that passes
    {"block_M": 64, "block_N": 16},
    {"block_M": 32, "block_N": 32},
]


def tune():
    return (AutoTuner.from_kernel(scale, CONFIGS).set_kernel_parameters((M, N), {})
            .set_profile_args(ref_prog=lambda a: a * 2.0, supply_type=TensorSupplyType.Normal, warmup=1, rep=4)
            .run())


def test_autotuning_in_cpu_mode_checks_configs_until_one_passes(capfd):
    with cpu_mode.enabled():
        result = tune()
        a = torch.randn(M, N, device="cuda")
        torch.testing.assert_close(result.kernel(a), a * 2.0)
    assert result.config == CONFIGS[2]
    assert [r.status for r in result.all_results] == ["compile error", "mismatch", "ok", CPU_MODE_SKIPPED,
                                                      CPU_MODE_SKIPPED]
    assert "TILECRAFT_CPU_AUTOTUNE_CONFIGS" in result.all_results[3].reason
    assert result.all_results[3].compile_s is None, "a skipped config is not compiled"
    err = capfd.readouterr().err
    assert err.count("TILECRAFT_CPU_AUTOTUNE_CONFIGS") == 1 and "5 configs" in err, err


def test_the_autotune_cap_is_a_knob_and_zero_checks_every_config(monkeypatch):
    with cpu_mode.enabled():
        monkeypatch.setenv("TILECRAFT_CPU_AUTOTUNE_CONFIGS", "2")
        two = tune()
        monkeypatch.setenv("TILECRAFT_AUTO_TUNING_DISABLE_CACHE", "1")   # the database would answer
        monkeypatch.setenv("TILECRAFT_CPU_AUTOTUNE_CONFIGS", "0")
        every = tune()
    assert [r.status for r in two.all_results][2:] == ["ok", "ok", CPU_MODE_SKIPPED]
    assert two.config in CONFIGS[2:4]
    assert [r.status for r in every.all_results][2:] == ["ok", "ok", "ok"]


def test_skipped_configs_are_not_stored_so_a_wider_run_checks_them(monkeypatch):
    with cpu_mode.enabled():
        first = tune()
        monkeypatch.setenv("TILECRAFT_CPU_AUTOTUNE_CONFIGS", "3")
        wider = tune()   # the database knows configs 0-2; 3 and 4 are checked now
    assert first.all_results[3].status == CPU_MODE_SKIPPED
    assert [r.status for r in wider.all_results] == ["compile error", "mismatch", "ok", "ok", "ok"]


# ------------------------------------------------------------------ float16 / bfloat16 references


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_products_accumulate_in_float32_and_round_once(dtype):
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 96, generator=g).to(dtype).requires_grad_()
    b = torch.randn(96, 48, generator=g).to(dtype)
    x = torch.randn(2, 4, 10, 10, generator=g).to(dtype)
    w = torch.randn(6, 4, 3, 3, generator=g).to(dtype)
    q = torch.randn(1, 2, 16, 8, generator=g).to(dtype)
    want_mm = (a.detach().float() @ b.float()).to(dtype)
    with cpu_mode.enabled():
        got = {"@": a @ b, "matmul": torch.matmul(a, b), "einsum": torch.einsum("ik,kj->ij", a, b),
               "linear": F.linear(a, b.t()), "bmm": torch.bmm(a[None], b[None])[0]}
        conv = F.conv2d(x, w, padding=1)
        sdpa = F.scaled_dot_product_attention(q, q, q)
        got["@"].float().sum().backward()
    for name, t in got.items():
        assert t.dtype == dtype and torch.equal(t, want_mm), name
    assert conv.dtype == dtype and torch.equal(conv, F.conv2d(x.float(), w.float(), padding=1).to(dtype))
    assert torch.equal(sdpa, F.scaled_dot_product_attention(q.float(), q.float(), q.float()).to(dtype))
    assert a.grad.dtype == dtype and torch.equal(a.grad, b.float().sum(1).expand(64, 96).to(dtype))


def test_mixed_or_float32_products_are_left_alone():
    a, b = torch.randn(8, 8), torch.randn(8, 8).half()
    with cpu_mode.enabled():
        assert torch.equal(a @ a, torch.mm(a, a))
        with pytest.raises(RuntimeError):
            a @ b   # torch's own error for mixed dtypes, as without CPU mode
        out = torch.empty(8, 8, dtype=torch.float16)
        torch.mm(b, b, out=out)   # out=: torch's own kernel
        assert out.dtype == torch.float16

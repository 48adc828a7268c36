"""AutoTuner and @autotune: parallel compile, failures skipped, the stored result, reporting."""

import os
import time

import pytest
import torch
from tuning_fakes import FakeJit, read_events, reference_matmul, use_virtual_clock

from tilecraft.autotuner import (AutoTuner, AutotuneError, autotune, current_autotune_inputs,
                                 set_autotune_inputs)
from tilecraft.autotuner import tuner as tuner_mod
from tilecraft.profiler import TensorSupplyType

M, N, K = 128, 32, 32
FAST = dict(warmup=1, rep=8)


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    for name in ("TILECRAFT_DISABLE_CACHE", "TILELANG_DISABLE_CACHE", "TILECRAFT_AUTO_TUNING_DISABLE_CACHE",
                 "TILELANG_AUTO_TUNING_DISABLE_CACHE", "TILELANG_CACHE_DIR", "TILELANG_AUTO_TUNING_MAX_CPU_COUNT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILECRAFT_AUTO_TUNING_MAX_CPU_COUNT", "2")
    use_virtual_clock(monkeypatch)  # which stand-in config is fastest must not depend on the load
    set_autotune_inputs.clear()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the stand-in kernels' timing must not depend on OpenMP barriers
    yield
    torch.set_num_threads(threads)
    set_autotune_inputs.clear()


def make_factory(log_dir, compile_s=0.0):
    def matmul(M, N, K, chunk=1, bug=False, launch_fail=False, hang=0.0):
        time.sleep(hang)  # a compile that takes forever
        if chunk <= 0:
            raise ValueError(f"chunk must be positive, got {chunk}")
        return dict(M=M, N=N, K=K, chunk=chunk, bug=bug, launch_fail=launch_fail)

    return FakeJit(matmul, log_dir, compile_s)


ref = reference_matmul   # the reference costs as much as 4 chunks


def tuner(factory, configs, **profile):
    args = dict(FAST, ref_prog=ref, supply_type=TensorSupplyType.Normal)
    args.update(profile)
    return AutoTuner.from_kernel(factory, configs).set_kernel_parameters((M, N, K), {}).set_profile_args(**args)


# ------------------------------------------------------------------------------------ search


def test_failures_are_skipped_and_the_fastest_correct_config_wins(tmp_path):
    configs = [
        {"chunk": 1},
        {"chunk": 0},                       # compile error
        {"chunk": 16},                      # fastest correct
        {"chunk": 128, "bug": True},        # faster still, but wrong
        {"chunk": 128, "launch_fail": True},
    ]
    result = tuner(make_factory(None), configs).run()
    assert result.config == {"chunk": 16}
    status = [r.status for r in result.all_results]
    assert status == ["ok", "compile error", "ok", "mismatch", "launch error"]
    reasons = [r.reason or "" for r in result.all_results]
    assert "chunk must be positive" in reasons[1]
    assert "fake_matmul" in reasons[3] and "mismatch" in reasons[3], "the mismatch summary is kept"
    assert "illegal memory access" in reasons[4]
    slow, best = result.all_results[0], result.all_results[2]
    assert best.latency == result.latency < slow.latency
    assert result.ref_latency is not None and result.ref_latency > 0
    assert result.func == ("prim_func", 16)
    a, b = torch.randn(M, K), torch.randn(K, N)
    torch.testing.assert_close(result.kernel(a, b), a @ b)
    assert best.stats["n"] >= 1 and best.stats["min"] <= best.stats["median"]


def test_all_configs_failing_is_a_clear_error():
    configs = [{"chunk": 0}, {"chunk": -3}, {"chunk": 8, "bug": True}]
    with pytest.raises(AutotuneError) as info:
        tuner(make_factory(None), configs).run()
    msg = str(info.value)
    assert "all 3 configs failed" in msg
    assert "chunk must be positive, got -3" in msg and "mismatch" in msg


def test_skip_check_and_no_reference():
    configs = [{"chunk": 8, "bug": True}, {"chunk": 1}]
    result = tuner(make_factory(None), configs, skip_check=True).run()
    assert result.all_results[0].ok, "no check: the buggy config is only timed"
    assert result.config == {"chunk": 8, "bug": True}
    result = tuner(make_factory(None), configs, ref_prog=None).run()
    assert result.ref_latency is None and result.all_results[0].ok


def test_configs_may_be_a_callable():
    def space(M, N, K):
        return [{"chunk": c} for c in (1, M // 8)]

    result = tuner(make_factory(None), space).run()
    assert result.config == {"chunk": M // 8} and len(result.all_results) == 2
    with pytest.raises(ValueError, match="empty"):
        tuner(make_factory(None), []).run()


def test_parallel_compile_fills_the_cache_for_the_parent(tmp_path):
    log = tmp_path / "events"
    log.mkdir()
    configs = [{"chunk": c} for c in (1, 2, 4, 8, 16)]
    result = tuner(make_factory(log, compile_s=0.3), configs).run()
    assert all(r.ok for r in result.all_results)
    events = read_events(log)
    parent = os.getpid()
    children = {pid for pid, _, _ in events if pid != parent}
    assert len(children) == 2, f"two worker processes compile (cap 2): {events}"
    child_tags = {tag for pid, kind, tag in events if pid != parent and kind == "miss"}
    assert child_tags == {"chunk2", "chunk4", "chunk8", "chunk16"}
    parent_events = [(kind, tag) for pid, kind, tag in events if pid == parent]
    assert ("miss", "chunk1") in parent_events, "the first config is compiled in the parent"
    assert {tag for kind, tag in parent_events if kind == "miss"} == {"chunk1"}, \
        "the parent's compiles of worker-built configs are cache hits (so are the runoff's loads)"
    assert {tag for kind, tag in parent_events if kind == "hit"} >= child_tags


def test_no_workers_when_the_cache_is_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_DISABLE_CACHE", "1")
    log = tmp_path / "events"
    log.mkdir()
    tuner(make_factory(log), [{"chunk": c} for c in (1, 2, 4)]).run()
    assert {pid for pid, _, _ in read_events(log)} == {os.getpid()}


def test_worker_count_knob(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_AUTO_TUNING_MAX_CPU_COUNT", "1")
    log = tmp_path / "events"
    log.mkdir()
    tuner(make_factory(log), [{"chunk": c} for c in (1, 2, 4)]).run()
    assert {pid for pid, _, _ in read_events(log)} == {os.getpid()}, "one worker: compile serially"


def test_a_hung_compile_times_out_and_is_skipped():
    configs = [{"chunk": 1}, {"chunk": 4}, {"chunk": 16, "hang": 300.0}]
    t0 = time.perf_counter()
    # 10 s: room for the other configs' compiles on a loaded machine (1 s timed them out now and then)
    result = tuner(make_factory(None), configs, timeout=10.0).run()
    # the worker hangs for 300 s: a run well short of that killed it (a bound, not a speed goal)
    assert time.perf_counter() - t0 < 200, "the hung worker is killed, not waited for"
    assert [r.status for r in result.all_results] == ["ok", "ok", "timeout"]
    assert "timed out" in result.all_results[2].reason
    assert result.config == {"chunk": 4}


# ------------------------------------------------------------------------------------ stored results


def test_second_run_comes_from_the_cache(tmp_path):
    configs = [{"chunk": 1}, {"chunk": 0}, {"chunk": 16}]
    first = tuner(make_factory(None), configs).run()
    assert not first.from_cache
    second = tuner(make_factory(None), configs).run()
    assert second.from_cache
    assert second.config == first.config and second.latency == first.latency
    assert second.ref_latency == first.ref_latency
    assert second.kernel.calls == 0, "nothing is benchmarked on a cache hit"
    assert [r.status for r in second.all_results] == [r.status for r in first.all_results]
    assert "chunk must be positive" in second.all_results[1].reason
    assert "from the tuning database" in second.table(show=False)


def test_what_invalidates_a_stored_result(monkeypatch):
    configs = [{"chunk": 1}, {"chunk": 16}]
    tuner(make_factory(None), configs).run()
    assert tuner(make_factory(None), configs).run().from_cache
    assert not tuner(make_factory(None), configs + [{"chunk": 4}]).run().from_cache, "other configs"
    assert not tuner(make_factory(None), configs, rtol=0.5).run().from_cache, "other check settings"
    other_args = AutoTuner.from_kernel(make_factory(None), configs).set_kernel_parameters((64, N, K), {})
    assert not other_args.set_profile_args(ref_prog=ref, **FAST).run().from_cache, "other factory arguments"
    monkeypatch.setattr(tuner_mod, "compiler_version_hash", lambda: "a-new-compiler")
    assert not tuner(make_factory(None), configs).run().from_cache, "another compiler version"
    monkeypatch.setenv("TILECRAFT_AUTO_TUNING_DISABLE_CACHE", "1")
    assert not tuner(make_factory(None), configs).run().from_cache
    monkeypatch.delenv("TILECRAFT_AUTO_TUNING_DISABLE_CACHE")
    monkeypatch.setenv("TILELANG_AUTO_TUNING_DISABLE_CACHE", "1")
    assert not tuner(make_factory(None), configs).run().from_cache, "the TileLang spelling works too"


# ------------------------------------------------------------------------------------ reporting


def test_table_and_plot(tmp_path):
    configs = [{"chunk": 1}, {"chunk": 4}, {"chunk": 0}, {"chunk": 16, "bug": True}]
    result = tuner(make_factory(None), configs, flops=2 * M * N * K).run()
    text = result.table(show=False)
    lines = text.splitlines()
    assert "TFLOP/s" in lines[1] and "vs ref" in lines[1] and "latency (ms)" in lines[1]
    assert "baseline: chunk=1" in lines[3]
    assert "change chunk=4" in lines[4]
    # which valid config is fastest depends on the machine's load: the table marks the tuner's pick
    best = [line for line in lines[3:5] if "best" in line]
    assert len(best) == 1 and f"chunk={result.config['chunk']}" in best[0]
    assert "compile error: ValueError: chunk must be positive" in lines[5]
    assert "change chunk=16 bug=True" in lines[6] and "mismatch" in lines[6]
    assert "reference" in lines[7]
    gbs = tuner(make_factory(None), configs[:2], bytes=4 * (M * K + K * N + M * N)).run()
    assert "GB/s" in gbs.table(show=False)
    png = tmp_path / "tune.png"
    assert result.plot(str(png)) == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_table_prints(capsys):
    result = tuner(make_factory(None), [{"chunk": 1}, {"chunk": 8}]).run()
    result.table()
    assert "change chunk=8" in capsys.readouterr().out
    assert "AutotuneResult(matmul" in repr(result)


# ------------------------------------------------------------------------------------ decorator and inputs


def make_tuned(seen_inputs):
    @autotune(configs=[{"chunk": 1}, {"chunk": 16}], ref_prog=ref, **FAST)
    @FakeJitDecorator(seen_inputs)
    def matmul(M, N, K, chunk=1):
        return dict(M=M, N=N, K=K, chunk=chunk)

    return matmul


class FakeJitDecorator:
    """``@jit``-like decorator whose kernels record the data pointers of their inputs."""

    def __init__(self, seen):
        self.seen = seen

    def __call__(self, fn):
        seen = self.seen

        class Recording(FakeJit):
            def __call__(self, *args, **kwargs):
                kernel = super().__call__(*args, **kwargs)
                inner = kernel.fn

                def recording(a, b):
                    seen.add(a.data_ptr())
                    return inner(a, b)

                kernel.fn = recording
                return kernel

        return Recording(fn)


def test_decorator_tunes_once_per_argument_set():
    tuned = make_tuned(set())
    assert tuned.__name__ == "matmul"
    kernel = tuned(M, N, K)
    assert tuned.last_result.config == {"chunk": 16}
    assert tuned(M, N, K) is kernel, "memoised per argument set"
    assert tuned.get_tune_result(M, N, K) is tuned.last_result
    other = tuned(64, N, K)
    assert other is not kernel and tuned.last_result.config == {"chunk": 16}
    assert len(tuned.results) == 2


def test_decorator_with_every_tuned_argument_given_just_compiles():
    tuned = make_tuned(set())
    kernel = tuned(M, N, K, chunk=4)
    assert tuned.last_result is None and kernel.fn is not None


def test_decorator_with_a_tuned_argument_given_positionally_just_compiles():
    """TileLang's examples call `tuned(batch, ..., BLOCK_N, BLOCK_H, ...)`: positional values of
    tuned parameters are fixed too (no second value from a config, no search)."""
    tuned = make_tuned(set())
    kernel = tuned(M, N, K, 4)
    assert tuned.last_result is None and kernel.fn is not None


def test_set_autotune_inputs_context_manager_and_plain_call(monkeypatch):
    monkeypatch.setenv("TILECRAFT_AUTO_TUNING_DISABLE_CACHE", "1")  # tune each time, so kernels run
    seen = set()
    tuned = make_tuned(seen)
    a, b = torch.randn(M, K), torch.randn(K, N)
    with set_autotune_inputs(a, b) as ctx:
        assert current_autotune_inputs() == (a, b) and ctx.inputs == (a, b)
        tuned(M, N, K)
    assert current_autotune_inputs() is None, "the context manager restores the previous inputs"
    assert seen == {a.data_ptr()}, "the kernels ran on the given tensors only"

    seen.clear()
    c, d = torch.randn(M, K), torch.randn(K, N)
    set_autotune_inputs([c, d])  # a plain call (a list works too) stays in force
    assert current_autotune_inputs() == (c, d)
    tuned(M, N, K)
    assert seen == {c.data_ptr()}
    set_autotune_inputs.clear()

    with set_autotune_inputs(a):
        with pytest.raises(ValueError, match="got 1 tensors but kernel 'fake_matmul' takes 2 inputs"):
            make_tuned(set())(M, N, K)


def test_decorator_requires_configs():
    with pytest.raises(TypeError, match="configs"):
        autotune()


def test_early_stop_skips_the_rest_after_k_configs_without_improvement():
    # chunk=16 is fastest (the stand-in's cost falls with chunk); after it, two slower configs end the search
    configs = [{"chunk": 16}, {"chunk": 1}, {"chunk": 2}, {"chunk": 4}, {"chunk": 8}]
    result = tuner(make_factory(None), configs, early_stop=2).run()
    assert result.config == {"chunk": 16}
    status = [r.status for r in result.all_results]
    assert status[:3] == ["ok", "ok", "ok"]
    assert status[3:] == ["skipped (early stop)"] * 2
    assert "did not beat the best" in result.all_results[3].reason
    assert "skipped" in result.table()
    with pytest.raises(ValueError, match="early_stop"):
        tuner(make_factory(None), configs, early_stop=0)


def test_early_stop_true_times_no_config_in_full_that_a_probe_shows_far_slower(monkeypatch):
    """TileLang's `run(early_stop=True, early_stop_factor=f)`: after the best so far, a config whose
    short probe is over f x that best is recorded with the probe's latency and not timed in full;
    the choice is the same as without it.  (chunk=1 costs 16x chunk=16's sleep floor.)"""
    monkeypatch.setenv("TILECRAFT_AUTO_TUNING_DISABLE_CACHE", "1")  # both runs tune
    configs = [{"chunk": 16}, {"chunk": 1}, {"chunk": 8}]
    result = tuner(make_factory(None), configs).run(early_stop=True, early_stop_factor=2.0)
    assert result.config == {"chunk": 16}
    first, slow, _ = result.all_results
    assert first.status == "ok" and slow.status == "skipped (early stop)"
    assert "short probe" in slow.reason and slow.latency > 2.0 * first.latency
    plain = tuner(make_factory(None), configs).run(early_stop=False)
    assert [r.status for r in plain.all_results] == ["ok"] * 3 and plain.config == {"chunk": 16}
    with pytest.raises(ValueError, match="early_stop_factor"):
        tuner(make_factory(None), configs).run(early_stop=True, early_stop_factor=0.5)


def test_the_decorator_takes_early_stop_and_its_factor():
    tuned = autotune(configs=[{"chunk": 16}, {"chunk": 1}], early_stop=True, early_stop_factor=2.0,
                     ref_prog=ref, **FAST)(make_factory(None))
    tuned(M, N, K)
    assert tuned.last_result.config == {"chunk": 16}
    assert tuned.last_result.all_results[1].status == "skipped (early stop)"
    with pytest.raises(TypeError, match="early_stop"):
        autotune(configs=[{"chunk": 16}], early_stop=3)


def test_grouped_compile_gives_the_same_choice():
    configs = [{"chunk": 1}, {"chunk": 16}]
    assert tuner(make_factory(None), configs).run(enable_grouped_compile=True).config == {"chunk": 16}
    with pytest.raises(TypeError, match="enable_grouped_compile"):
        tuner(make_factory(None), configs).run(enable_grouped_compile="yes")


# ------------------------------------------------------------------------------------ the runoff


def _row(index, latency):
    from tilecraft.autotuner import ConfigResult
    return ConfigResult(index, {"i": index}, latency=latency)


def test_runoff_leaders_and_the_tie_rule():
    from tilecraft.autotuner.measure import POLICIES
    gpu, cpu = POLICIES["cuda"], POLICIES["cpu"]
    rows = [_row(0, 1.000), _row(1, 0.996), _row(2, 1.040), _row(3, 1.300), _row(4, 1.049), _row(5, 1.03)]
    # CUDA: within 5% of the fastest (0.996 -> 1.0458), at most 4, fastest first
    assert [r.index for r in tuner_mod.runoff_leaders(rows, gpu)] == [1, 0, 5, 2]
    assert tuner_mod.runoff_leaders([_row(0, 1.0), _row(1, 2.0)], gpu) == [], "no config close to the fastest"
    assert tuner_mod.runoff_leaders([_row(0, 1.0)], gpu) == []
    # CPU: every config that passed (a config's own timing may fall in a burst of load), the fastest 16
    assert [r.index for r in tuner_mod.runoff_leaders(rows, cpu)] == [1, 0, 5, 2, 4, 3]
    many = [_row(i, 1.0 + i / 100) for i in range(20)]
    assert [r.index for r in tuner_mod.runoff_leaders(many, cpu)] == list(range(16))
    assert tuner_mod.runoff_leaders([_row(0, 1.0), _row(1, 20.0)], cpu) != []
    # after the runoff: within the tie (CUDA 1%, CPU 3%) of the fastest, the first listed wins; beyond it, the fastest
    assert tuner_mod.choose_best(rows, gpu).index == 0
    assert tuner_mod.choose_best([_row(0, 1.02), _row(1, 1.0)], gpu).index == 1
    assert tuner_mod.choose_best([_row(0, 1.02), _row(1, 1.0)], cpu).index == 0
    assert tuner_mod.choose_best([_row(0, 1.04), _row(1, 1.0)], cpu).index == 1
    assert tuner_mod.choose_best([_row(0, 1.0), _row(1, 1.0)], cpu).index == 0


def test_the_cpu_latency_is_a_low_quantile_and_the_runoff_marks_the_noise():
    """CPU policy: a config's latency is the 5% quantile of its samples (load only adds time to a call);
    after the runoff, a leader whose ratio to the fastest the rounds cannot tell from a tie is within noise,
    one that is slower in every round is not."""
    from tilecraft.autotuner.measure import POLICIES, settle_runoff
    cpu = POLICIES["cpu"]
    samples = [1.0] * 6 + [5.0] * 94  # 94 calls stretched by other jobs
    assert cpu.latency_of(samples) == 1.0
    assert POLICIES["cuda"].latency_of(samples) == 5.0
    # 12 rounds: #0 and #1 alternate being faster by 2%; #2 is 10% slower than both in every round
    rounds = {0: [[1.00 + 0.02 * (k % 2)] * 4 + [3.0] for k in range(12)],
              1: [[1.02 - 0.02 * (k % 2)] * 4 + [3.0] for k in range(12)],
              2: [[1.12] * 4 + [3.0] for k in range(12)]}
    leaders = [_row(0, 1.5), _row(1, 1.4), _row(2, 1.45)]
    settle_runoff(leaders, rounds, cpu)
    assert [r.stats["n"] for r in leaders] == [60, 60, 60] and leaders[2].stats["runoff_rounds"] == 12
    assert leaders[0].latency == pytest.approx(1.0) and leaders[1].latency == pytest.approx(1.0)
    assert leaders[2].latency == pytest.approx(1.12)
    assert [r.within_noise for r in leaders] == [True, True, False]
    assert tuner_mod.choose_best(leaders, cpu).index == 0
    # a leader the runoff cannot tell from the fastest ties with it even beyond the point-estimate tie (7% here)
    wide = [_row(0, 1.9), _row(1, 1.6), _row(2, 1.5)]
    wide[0].within_noise, wide[1].within_noise, wide[2].within_noise = False, True, True
    assert tuner_mod.choose_best(wide, cpu).index == 1
    wide[1].latency = 1.8
    assert tuner_mod.choose_best(wide, cpu).index == 1, "marked: a tie however far its estimate (20% here)"
    wide[1].latency = 1.6
    wide[1].within_noise = wide[2].within_noise = False
    assert tuner_mod.choose_best(wide, cpu).index == 2, "no marks: the fastest"


@pytest.mark.parametrize("order", [(1, 2), (2, 1)])
def test_configs_that_tie_are_timed_again_and_the_first_listed_wins(order, monkeypatch):
    """Two configs of equal speed (the same chunk; the virtual clock makes their timings equal) are
    timed again in the runoff (on the CPU target, so is the slower one: measure.py): their samples
    grow, and the tie goes to the first listed, whichever it is."""
    tied = {1: {"chunk": 16}, 2: {"chunk": 16, "launch_fail": False}}
    configs = [{"chunk": 1}, tied[order[0]], tied[order[1]]]
    monkeypatch.setenv("TILECRAFT_AUTO_TUNING_DISABLE_CACHE", "1")  # every run measures
    once = {i: tuner(make_factory(None), [c]).run() for i, c in enumerate(configs[:2])}  # alone: no runoff
    assert all("runoff" not in r.phase_seconds for r in once.values())
    result = tuner(make_factory(None), configs).run()
    assert result.config == configs[1]
    assert "runoff" in result.phase_seconds
    slow, first, second = result.all_results
    assert slow.stats["runoff_rounds"] == first.stats["runoff_rounds"] == 12 and not slow.within_noise
    assert first.stats["n"] > once[1].all_results[0].stats["n"], "the leaders' latencies come from the runoff"
    assert second.stats["n"] == first.stats["n"]
    assert first.latency == pytest.approx(second.latency, rel=0.01)
    assert first.within_noise and second.within_noise and "(within noise)" in result.table(show=False)

"""Profiler: synthetic inputs, timing, and the correctness check's verdicts and messages."""

import re
import time

import pytest
import torch
from tuning_fakes import FakeKernel, ParamInfo, chunked_matmul, matmul_params

from tilecraft.profiler import (BenchStats, Profiler, TensorSupplyType, default_tolerances, do_bench,
                                get_tensor_supply, mismatch_report, summarize)

# ------------------------------------------------------------------------------------ supply


def _param(dtype, shape=(64, 64)):
    return ParamInfo("X", shape, dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int8, torch.int32])
def test_integer_supply_is_small_integers_in_the_dtype(dtype):
    t = get_tensor_supply(TensorSupplyType.Integer, "cpu")(_param(dtype))
    assert t.dtype == dtype and t.shape == (64, 64) and t.device.type == "cpu"
    values = set(t.float().unique().tolist())
    assert values <= {-2.0, -1.0, 0.0, 1.0, 2.0} and len(values) >= 4


def test_unsigned_and_bool_supply():
    u = get_tensor_supply(TensorSupplyType.Auto, "cpu")(_param(torch.uint8))
    assert u.dtype == torch.uint8 and set(u.unique().tolist()) <= {0, 1, 2}
    b = get_tensor_supply(TensorSupplyType.Auto, "cpu")(_param(torch.bool))
    assert b.dtype == torch.bool and 0 < int(b.sum()) < b.numel()


def test_float_supplies():
    big = _param(torch.float32, (256, 256))
    uni = get_tensor_supply(TensorSupplyType.Uniform, "cpu")(big)
    assert -1.0 <= float(uni.min()) < -0.9 and 0.9 < float(uni.max()) <= 1.0
    for kind in (TensorSupplyType.Normal, TensorSupplyType.Randn, TensorSupplyType.Auto):
        t = get_tensor_supply(kind, "cpu")(big)
        assert abs(float(t.mean())) < 0.05 and abs(float(t.std()) - 1.0) < 0.05
        assert len(t.unique()) > 1000, "floats must not be integers"
    assert float(get_tensor_supply(TensorSupplyType.Zero, "cpu")(big).abs().sum()) == 0
    assert bool((get_tensor_supply(TensorSupplyType.One, "cpu")(big) == 1).all())
    half = get_tensor_supply(TensorSupplyType.Normal, "cpu")(_param(torch.float16))
    assert half.dtype == torch.float16


def test_integer_dtype_asked_for_normal_gets_integers():
    t = get_tensor_supply(TensorSupplyType.Normal, "cpu")(_param(torch.int32))
    assert t.dtype == torch.int32 and set(t.unique().tolist()) <= {-2, -1, 0, 1, 2}


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="no float8 in this torch")
def test_float8_supply():
    t = get_tensor_supply(TensorSupplyType.Auto, "cpu")(_param(torch.float8_e4m3fn))
    assert t.dtype == torch.float8_e4m3fn and float(t.float().std()) > 0.5


def test_symbolic_shape_is_a_clear_error():
    with pytest.raises(ValueError, match="symbolic dimension"):
        get_tensor_supply(TensorSupplyType.Auto, "cpu")(ParamInfo("A", ("m", 64), torch.float16))


def test_fresh_inputs_each_time():
    prof = Profiler(FakeKernel(chunked_matmul(8), matmul_params(16, 16, 16)), TensorSupplyType.Normal)
    a1, b1 = prof.supply()
    a2, _ = prof.supply()
    assert a1.shape == (16, 16) and b1.shape == (16, 16)
    assert not torch.equal(a1, a2)
    assert len(prof._get_inputs(with_output=True)) == 3


# ------------------------------------------------------------------------------------ statistics and timing


def test_summarize_is_the_one_place_for_statistics():
    times = [4.0, 1.0, 3.0, 2.0, 10.0]
    assert summarize(times, "mean") == 4.0
    assert summarize(times, "median") == 3.0
    assert summarize(times, "min") == 1.0 and summarize(times, "max") == 10.0
    assert summarize(times, quantiles=[0.5]) == 3.0
    assert summarize(times, quantiles=[0.0, 0.25, 1.0]) == [1.0, 2.0, 10.0]
    assert summarize(times, "all") == times
    assert BenchStats(tuple(times)).quantile(0.125) == pytest.approx(1.5)
    with pytest.raises(ValueError):
        summarize(times, "average")


@pytest.mark.timing
def test_do_bench_measures_time_per_call():
    def sleepy():
        time.sleep(0.002)

    ms = do_bench(sleepy, warmup=4, rep=20, device="cpu")
    assert 2.0 <= ms < 20.0  # generous: CI machines are shared
    samples = do_bench(sleepy, warmup=1, rep=20, return_mode="all", device="cpu")
    assert 3 <= len(samples) <= 10, "rep is milliseconds of work, not a count"


def test_do_bench_fixed_counts():
    calls = []
    samples = do_bench(lambda: calls.append(1), n_warmup=3, n_repeat=7, return_mode="all", device="cpu")
    assert len(samples) == 7
    assert 1 + 1 + 3 + 7 <= len(calls) <= 1 + 5 + 3 + 7  # first call, estimate, warm-up, timed
    with pytest.raises(ValueError):
        do_bench(lambda: None, return_mode="nope", device="cpu")
    with pytest.raises(ValueError):
        do_bench(lambda: None, cuda_graph=True, device="cpu")


def test_profiler_benches_the_kernel_and_references():
    kernel = FakeKernel(chunked_matmul(1), matmul_params(64, 64, 64))
    prof = Profiler(kernel)
    slow = prof.do_bench(warmup=5, rep=30, return_mode="min")
    assert kernel.calls > 3 and slow > 0
    fast = prof.do_bench(lambda a, b: a @ b, warmup=5, rep=30, return_mode="min")
    assert fast > 0
    seen = []
    prof.do_bench(lambda: seen.append(1), n_warmup=1, n_repeat=2)  # zero-argument callables work too
    assert seen
    given = [torch.ones(64, 64), torch.ones(64, 64)]
    assert prof.do_bench(func=lambda a, b: seen.append(a is given[0]), input_tensors=given, n_repeat=2)
    assert seen[-1] is True
    stats = prof.bench_stats(n_warmup=1, n_repeat=5)
    assert stats.n == 5 and stats.min <= stats.median <= stats.max


@pytest.mark.timing
def test_profiler_times_tell_a_fast_reference_from_a_slow_kernel():
    """A relation between two measured times: off in the loaded CPU tier (tests/conftest.py)."""
    prof = Profiler(FakeKernel(chunked_matmul(1), matmul_params(64, 64, 64)))
    slow = prof.do_bench(warmup=5, rep=30, return_mode="min")
    fast = prof.do_bench(lambda a, b: a @ b, warmup=5, rep=30, return_mode="min")
    assert fast < slow, "a single matmul beats 64 row-by-row matmuls"


# ------------------------------------------------------------------------------------ correctness


def _kernel(fn, m=32, n=32, k=32, dtype=torch.float32, name="matmul_kernel"):
    return Profiler(FakeKernel(fn, matmul_params(m, n, k, dtype), name=name), TensorSupplyType.Normal)


def test_correct_kernel_passes():
    _kernel(chunked_matmul(4)).assert_allclose(lambda a, b: a @ b)
    _kernel(chunked_matmul(4), dtype=torch.float16).assert_allclose(lambda a, b: (a.float() @ b.float()))


def test_wrong_kernel_fails_with_a_summary():
    def broken(a, b):
        c = a @ b
        c[3:5, :] += 1.0
        c[7, 9] = float("nan")
        return c

    with pytest.raises(AssertionError) as info:
        _kernel(broken).assert_allclose(lambda a, b: a @ b)
    msg = str(info.value)
    assert "matmul_kernel" in msg and "'C'" in msg and "(32, 32)" in msg and "float32" in msg
    assert "65 of 1024 elements mismatch" in msg
    assert "NaN: 1 in actual, 0 in reference" in msg
    assert re.search(r"max abs error 1(\.0*\d*)? at \([34], \d+\)", msg), msg
    assert "(3, 0):" in msg, "first mismatching indices are listed"


def test_mismatch_ratio_threshold():
    def few_wrong(a, b):  # 5 wrong of 1024 = 0.49%
        c = a @ b
        c.view(-1)[:5] += 10
        return c

    _kernel(few_wrong).assert_allclose(lambda a, b: a @ b, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError, match="5 of 1024"):
        _kernel(few_wrong).assert_allclose(lambda a, b: a @ b, max_mismatched_ratio=0.0)


def test_tolerances():
    def off_by(delta):
        return lambda a, b: a @ b + delta

    _kernel(off_by(5e-3)).assert_allclose(lambda a, b: a @ b, rtol=0, atol=1e-2)
    with pytest.raises(AssertionError):
        _kernel(off_by(5e-3)).assert_allclose(lambda a, b: a @ b, rtol=0, atol=1e-3)
    # None: per-dtype defaults (float32: 1e-3)
    assert default_tolerances(torch.float32) == (1e-3, 1e-3)
    assert default_tolerances(torch.int32) == (0.0, 0.0)
    with pytest.raises(AssertionError):
        _kernel(off_by(5e-3)).assert_allclose(lambda a, b: a @ b, rtol=None, atol=None)


def test_shape_and_output_count_mismatch():
    with pytest.raises(AssertionError, match="reference has shape"):
        _kernel(lambda a, b: a @ b).assert_allclose(lambda a, b: (a @ b)[:, :16])
    with pytest.raises(AssertionError, match="returned 1 output"):
        _kernel(lambda a, b: a @ b).assert_allclose(lambda a, b: (a @ b, a))


def test_every_output_is_compared():
    params = [ParamInfo("X", (8, 8), torch.float32), ParamInfo("Y", (8, 8), torch.float32, True),
              ParamInfo("Z", (8,), torch.float32, True)]
    good = FakeKernel(lambda x: (x * 2, x.sum(1)), params, name="two_out")
    Profiler(good).assert_allclose(lambda x: (x * 2, x.sum(1)))
    bad = FakeKernel(lambda x: (x * 2, x.sum(0)), params, name="two_out")
    with pytest.raises(AssertionError, match="output 'Z'"):
        Profiler(bad).assert_allclose(lambda x: (x * 2, x.sum(1)))


def test_in_place_kernel_without_outputs():
    params = [ParamInfo("A", (8, 8), torch.float32), ParamInfo("B", (8, 8), torch.float32)]

    def inplace(a, b):
        b.copy_(a * 3)

    def ref_inplace(factor):
        def ref(a, b):
            b.copy_(a * factor)
        return ref

    Profiler(FakeKernel(inplace, params)).assert_allclose(ref_inplace(3))
    Profiler(FakeKernel(inplace, params)).assert_allclose(lambda a, b: a * 3)  # returned: the last argument
    with pytest.raises(AssertionError, match="'B'"):
        Profiler(FakeKernel(inplace, params)).assert_allclose(lambda a, b: a * 4)
    with pytest.raises(AssertionError, match="'B'"):
        Profiler(FakeKernel(inplace, params)).assert_allclose(ref_inplace(2))


def test_reference_cannot_disturb_the_kernel_inputs():
    prof = _kernel(lambda a, b: a @ b)

    def mutating_ref(a, b):
        out = a @ b
        a.zero_()
        return out

    prof.assert_allclose(mutating_ref)


def test_manual_check_prog_and_integers():
    seen = {}

    def check(actual, expected):
        seen["ok"] = torch.equal(actual, expected)

    _kernel(lambda a, b: a @ b).assert_allclose(lambda a, b: a @ b, manual_check_prog=check)
    assert seen["ok"]
    assert mismatch_report(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4]), max_mismatched_ratio=0.0,
                           kernel_name="k", output_name="o").startswith("k: output 'o'")
    assert mismatch_report(torch.tensor([1, 2, 3]), [1, 2, 3], max_mismatched_ratio=0.0) is None
    assert mismatch_report(torch.tensor([float("nan")]), torch.tensor([float("nan")])) is None


def test_run_once():
    prof = _kernel(lambda a, b: a @ b, m=4, n=5, k=6)
    assert prof.run_once().shape == (4, 5)


# ------------------------------------------------------------------------------------ GPU (run on the H200)


@pytest.mark.gpu
@pytest.mark.parametrize("cuda_graph", [False, True])
def test_cuda_do_bench(cuda_graph):
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    ms = do_bench(lambda: a @ a, warmup=5, rep=20, cuda_graph=cuda_graph, device="cuda")
    assert 0.0 < ms < 50.0
    q = do_bench(lambda: a @ a, warmup=5, rep=20, quantiles=[0.2, 0.5, 0.8], device="cuda")
    assert q[0] <= q[1] <= q[2]


def test_flush_l2_takes_clean_dirty_or_off():
    for ok in (True, False, "clean", "dirty"):
        do_bench(lambda: None, n_warmup=0, n_repeat=2, device="cpu", flush_l2=ok)
    with pytest.raises(ValueError, match="flush_l2 must be"):
        do_bench(lambda: None, n_warmup=0, n_repeat=2, device="cpu", flush_l2="cold")

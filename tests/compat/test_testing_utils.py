"""`tilecraft.testing`, `tilecraft.utils`, `tilecraft.math` and the standalone `do_bench` with
TileLang's meaning."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import tilecraft
import tilecraft.testing as tt
from tilecraft.utils import determine_fp8_type, determine_torch_fp8_type
from tilecraft.utils.tensor import map_torch_type, torch_assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_cdiv_and_powers_of_two_against_python():
    for a in range(-20, 60):
        for b in (1, 3, 16):
            assert tilecraft.cdiv(a, b) == -(-a // b)
    for x in range(1, 300):
        p = tilecraft.math.next_power_of_2(x)
        assert p >= x and p & (p - 1) == 0 and p // 2 < x
        q = tilecraft.math.prev_power_of_2(x)
        assert q <= x < 2 * q
    assert tilecraft.next_power_of_2(0) == 1
    with pytest.raises(TypeError):
        tilecraft.cdiv(1.5, 2)


def test_map_torch_type_and_fp8_helpers():
    import tilecraft.language as T
    assert map_torch_type("float16") is torch.float16 and map_torch_type(T.bfloat16) is torch.bfloat16
    assert map_torch_type("float") is torch.float32 and map_torch_type(torch.int8) is torch.int8
    assert map_torch_type("float8_e4m3") is torch.float8_e4m3fn
    assert determine_fp8_type() == "float8_e4m3fn" and determine_fp8_type("e5m2") == "float8_e5m2"
    assert determine_torch_fp8_type("e5m2") is torch.float8_e5m2
    assert tilecraft.DataType("bfloat16").bits == 16


def test_torch_assert_close_allows_the_stated_mismatch_ratio():
    a = torch.randn(1000)
    b = a.clone()
    b[:3] += 1.0
    torch_assert_close(a, b, rtol=1e-3, atol=1e-3, max_mismatched_ratio=0.005)
    with pytest.raises(AssertionError, match="3 of 1000 elements mismatch"):
        torch_assert_close(a, b, rtol=1e-3, atol=1e-3, max_mismatched_ratio=0.001)
    with pytest.raises(AssertionError, match="shape"):
        torch_assert_close(a, b[:10])
    with pytest.raises(AssertionError, match="float16"):
        torch_assert_close(a, b.half())


def test_set_random_seed_reproduces():
    tt.set_random_seed(7)
    x = torch.randn(5)
    tt.set_random_seed(7)
    assert torch.equal(x, torch.randn(5))


def test_regression_harness_runs_prefixed_functions_in_order(capsys):
    calls = []

    def run_regression_perf(scale=1.0):
        calls.append(scale)
        return 0.5 * scale
    ns = {"__name__": "regression_example_x", "tt": tt, "run_regression_perf": run_regression_perf}
    exec(textwrap.dedent("""
        def regression_b():
            tt.process_func(run_regression_perf, "b", scale=2.0)
        def regression_a():
            tt.process_func(run_regression_perf)
        def helper():
            raise AssertionError("not a regression_ function")
        results = tt.regression()
    """), ns)
    assert calls == [1.0, 2.0]
    assert [(r.name, r.latency) for r in ns["results"]] == [(run_regression_perf.__module__, 0.5), ("b", 1.0)]
    assert "b: 1.0" in capsys.readouterr().out


def test_skip_marks_follow_the_machine(tmp_path):
    src = textwrap.dedent("""
        import tilecraft.testing as tt

        @tt.requires_cuda
        def test_needs_cuda():
            pass

        @tt.requires_cuda_compute_version_ge(1, 0)
        def test_any_gpu():
            pass

        @tt.requires_package("torch")
        def test_with_torch():
            pass

        @tt.requires_package("surely_not_a_package_xyz")
        def test_missing_package():
            pass

        if __name__ == "__main__":
            tt.main()
    """)
    (tmp_path / "test_marks.py").write_text(src)
    out = subprocess.run([sys.executable, str(tmp_path / "test_marks.py"), "-q", "-rs", "-p", "no:cacheprovider"],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    cuda = torch.cuda.is_available()
    assert out.returncode == 0, out.stdout + out.stderr
    assert ("3 passed, 1 skipped" if cuda else "1 passed, 3 skipped") in out.stdout, out.stdout
    assert "requires the package(s) surely_not_a_package_xyz" in out.stdout


def test_standalone_do_bench_takes_tilelang_arguments():
    from tilecraft.profiler import do_bench
    ms = do_bench(lambda: sum(range(2000)), warmup=1, rep=5, backend="cpu")
    assert ms > 0
    with pytest.raises(ValueError, match="backend must be one of"):
        do_bench(lambda: None, backend="nsys")


def test_dtype_as_torch_and_profiler_func():
    import tilecraft.language as T
    assert T.float16.as_torch() is torch.float16 and T.dtype("float8_e5m2").as_torch() is torch.float8_e5m2
    assert T.bfloat16.itemsize == 2

    @tilecraft.jit(out_idx=[-1], target="cpu")
    def twice(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(N):
                    B[i] = A[i] * 2
        return main
    kernel = twice(32)
    a = torch.randn(32)
    torch.testing.assert_close(kernel.get_profiler().func(a), a * 2)

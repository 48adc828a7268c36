"""The `tilecraft` command as a new user meets it, on a machine without a GPU: doctor, show, bench,
cache, and the autotuning example (the seed tutorial's section 7 and the skill's AutoTuner form)."""
from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from fresh_python import run_python  # tests/: a fresh process without paying `import torch`

from tilecraft import cli

ROOT = Path(__file__).resolve().parents[2]

TINY = textwrap.dedent('''
    import tilecraft as tilelang
    import tilecraft.language as T

    NOT_A_KERNEL = 3


    @tilelang.jit(out_idx=[-1])
    def scale_add(N, block_N=64, alpha=2.0, dtype="float32"):
        @T.prim_func
        def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
            with T.Kernel(T.ceildiv(N, block_N), threads=64) as bx:
                for i in T.Parallel(block_N):
                    if bx * block_N + i < N:
                        C[bx * block_N + i] = A[bx * block_N + i] * alpha + B[bx * block_N + i]
        return main


    def plain(N):
        return scale_add.get_tir(N)


    @tilelang.jit
    def broken(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N, N), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.copy(A, B)
        return main


    def crashes(N):
        return {}[N]


    if __name__ == "__main__":
        raise SystemExit("importing must not run this")
''')


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    for name in ("TILECRAFT_DISABLE_CACHE", "TILELANG_DISABLE_CACHE", "TILELANG_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny_kernels.py"
    path.write_text(TINY)
    return path


def run_cli(*args, timeout=120, env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    return run_python([sys.executable, "-m", "tilecraft", *args], cwd=ROOT, env=env, timeout=timeout)


def show(capsys, *args):
    rc = cli.main(["show", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def _nvrtc_works() -> bool:
    try:
        from tilecraft.compiler import nvrtc_version
        nvrtc_version()
        return True
    except Exception:
        return False


def _cuda_tools() -> bool:
    from tilecraft.compiler import find_cuda_tool
    return find_cuda_tool("cuobjdump") is not None or find_cuda_tool("nvdisasm") is not None


# ------------------------------------------------------------------------------------ help
def test_help_lists_every_command():
    proc = run_cli("--help", timeout=60)
    assert proc.returncode == 0
    for command in ("demo", "doctor", "bench", "show", "cache"):
        assert command in proc.stdout


# ------------------------------------------------------------------------------------ doctor
def test_doctor_prints_every_check_and_passes_with_the_cpu_target():
    proc = run_cli("doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for name in ("python", "torch", "GPU", "driver", "NVRTC", "nvcc", "cuobjdump/nvdisasm", "C++ compiler", "cache"):
        assert f"  {name} " in out, f"no line for {name}:\n{out}"
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = [ln for ln in out.splitlines() if ln[:4].strip() in ("OK", "WARN", "FAIL")]
    assert len(lines) >= 9
    # every problem comes with a fix
    for i, ln in enumerate(out.splitlines()):
        if ln.startswith(("WARN", "FAIL")):
            assert "fix:" in out.splitlines()[i + 1], ln
    assert "C++ compiler" in out and "compiled and ran a CPU kernel" in out


def test_doctor_reports_a_missing_cxx_with_a_fix(monkeypatch, capsys):
    from tilecraft import doctor
    monkeypatch.setenv("TILECRAFT_CXX", "/nonexistent/g++")
    check = doctor.check_cxx()
    assert check.status == doctor.FAIL and "TILECRAFT_CXX" in check.fix


@pytest.mark.cuda_compile
def test_doctor_warns_of_the_nvrtc_whose_ptxas_miscompiles_a_clamp_compare(monkeypatch):
    """NVRTC 13.0's ptxas turns `max(0, min(x, C)) == C` into its opposite for sm_90 (session 25, on the H200);
    the NVRTC line says so with the fix; another version is OK."""
    from tilecraft import compiler, doctor
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: (13, 0))
    check = doctor.check_nvrtc(None)
    assert check.status == doctor.WARN and "max(0, min(x, C)) == C" in check.detail and "13.5" in check.fix
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: (13, 5))
    assert doctor.check_nvrtc(None).status == doctor.OK


def test_doctor_reports_a_bad_setting(monkeypatch):
    from tilecraft import doctor
    monkeypatch.setenv("TILECRAFT_CUDA_COMPILER", "clang")
    check = doctor.check_settings()
    assert check.status == doctor.FAIL and "TILECRAFT_CUDA_COMPILER" in check.detail


def test_doctor_reports_an_unwritable_cache(monkeypatch, tmp_path):
    from tilecraft import doctor
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(blocker / "cache"))
    check = doctor.check_cache()
    assert check.status == doctor.FAIL and "TILECRAFT_CACHE_DIR" in check.fix


# ------------------------------------------------------------------------------------ show
def test_show_ir_lowered_and_source_on_the_cpu(tiny, capsys):
    rc, out, err = show(capsys, f"{tiny}:scale_add", "--args", 1000, "--kwargs", "block_N=128", "--what", "ir",
                        "--target", "cpu")
    assert rc == 0, err
    assert out.startswith("@T.prim_func") and "T.Kernel(8" in out and "(1000,)" in out

    rc, out, err = show(capsys, f"{tiny}:scale_add", 1000, "--what", "lowered", "--target", "cpu")
    assert rc == 0, err
    assert "@T.prim_func" in out

    rc, out, err = show(capsys, f"{tiny}:scale_add", 1000, "alpha=3.0", "--target", "cpu")  # default: source
    assert rc == 0, err
    assert "tc_entry" in out and "3" in out


def test_show_a_plain_function_and_several_sections(tiny, capsys):
    rc, out, err = show(capsys, f"{tiny}:plain", 256, "--what", "ir,source", "--target", "cpu")
    assert rc == 0, err
    assert "===== plain: ir" in out and "===== plain: source" in out


def test_show_cuda_source_and_sass_for_sm_90a(tiny, capsys):
    if not _nvrtc_works():
        pytest.skip("NVRTC is not installed")
    rc, out, err = show(capsys, f"{tiny}:scale_add", 4096, "--target", "sm_90a", "--what", "source")
    assert rc == 0, err
    assert "__global__" in out and "sm_90a" in out
    if not _cuda_tools():
        pytest.skip("cuobjdump/nvdisasm not installed")
    rc, out, err = show(capsys, f"{tiny}:scale_add", 4096, "--what", "sass")  # no GPU: sm_90a by itself
    assert rc == 0, err
    assert "sm_90" in out and ("FFMA" in out or "FADD" in out or "FMUL" in out), out[:2000]


def test_show_plan(capsys):
    if not _nvrtc_works():
        pytest.skip("NVRTC is not installed")
    rc, out, err = show(capsys, "tilecraft.kernels:matmul", 512, 512, 512, "--target", "sm_90a", "--what", "plan")
    assert rc == 0, err
    # sm_90a splits the loop as two blocks per SM on a 4-stage ring (transform/pipelining/warp_specialized.py)
    assert "T.gemm 128x128x32 on wgmma" in out and "T.Pipelined, 4 stages" in out, out
    assert "two blocks per SM" in out and "ring deepened from the program's 3 stages" in out, out
    rc, out, err = show(capsys, "tilecraft.kernels:matmul", 512, 512, 512, "--target", "sm_80", "--what", "plan")
    assert rc == 0, err
    assert "T.gemm 128x128x32 on mma.sync" in out and "T.Pipelined, 3 stages" in out, out


def test_show_a_module_by_dotted_name(capsys):
    rc, out, err = show(capsys, "tilecraft.kernels:vector_add", 1024, "--what", "ir")
    assert rc == 0, err
    assert "@T.prim_func" in out


@pytest.mark.parametrize("argv, message", [
    (["{dir}/missing.py:f"], "no such file"),
    (["no_such_module_zzz:f"], "no such file or module"),
    (["{tiny}:nope"], "has no 'nope'"),
    (["{tiny}"], "say which factory"),
    (["{tiny}:NOT_A_KERNEL"], "not a kernel factory"),
    (["{tiny}:scale_add"], "missing a required argument: 'N'"),
    (["{tiny}:scale_add", "1", "2", "3", "4", "5"], "too many positional arguments"),
    (["{tiny}:scale_add", "64", "--what", "bogus"], "--what 'bogus'"),
    (["{tiny}:scale_add", "64", "--target", "sm_75"], "unsupported CUDA arch"),
    (["{tiny}:scale_add", "64", "--what", "sass", "--target", "cpu"], "SASS exists only for CUDA"),
    (["{tiny}:broken", "64", "--target", "cpu"], "broken(64)"),
    (["{tiny}:crashes", "5"], "KeyError: 5"),
])
def test_show_errors_are_one_clean_message(tiny, capsys, argv, message):
    argv = [a.format(tiny=tiny, dir=tiny.parent) for a in argv]
    rc, out, err = show(capsys, *argv)
    assert rc == 2
    assert message in err, err
    assert "Traceback" not in err


def test_show_error_in_the_program_names_the_users_line(tiny, capsys):
    rc, out, err = show(capsys, f"{tiny}:crashes", 5)
    assert rc == 2 and f"{tiny}:" in err


def test_show_broken_file_and_no_traceback_through_the_real_command(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = (\n")
    proc = run_cli("show", f"{bad}:x", timeout=60)
    assert proc.returncode == 2
    assert "SyntaxError" in proc.stderr and f"{bad}:" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------------ bench
def test_bench_list_names_the_groups():
    proc = run_cli("bench", "--list", timeout=60)
    assert proc.returncode == 0, proc.stderr
    groups = proc.stdout.split()
    assert "gemm" in groups and "flash_attention" in groups


def test_bench_on_the_cpu_target_names_torch_references(tmp_path):
    proc = run_cli("bench", "--quick", "--cpu", "--only", "vector_add,launch", timeout=600,
                   env_extra={"OUT": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "vector_add fp32" in out and "| torch.add |" in out and "host time / cached launch" in out
    assert "PASS" in out and "accurate fp32 reference" in out
    assert list(tmp_path.glob("*_cpu_quick.md")), "the table was not written to $OUT"


def test_bench_outside_a_checkout_says_where_the_suite_is(monkeypatch, capsys):
    monkeypatch.setattr(cli, "bench_script", lambda: None)
    rc = cli.main(["bench", "--list"])
    err = capsys.readouterr().err
    assert rc == 2 and "source checkout" in err


# ------------------------------------------------------------------------------------ cache
def test_cache_info_and_clear(tmp_path, capsys, tiny):
    assert show(capsys, f"{tiny}:scale_add", 100, "--target", "cpu")[0] == 0  # one entry
    assert cli.main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "cache") in out and "entries" in out and "kernels" in out
    assert cli.main(["cache", "clear"]) == 0
    assert "cache cleared" in capsys.readouterr().out
    cli.main(["cache", "info"])
    assert "entries    0" in capsys.readouterr().out


# ------------------------------------------------------------------------------------ autotune example
def test_autotune_example_runs_on_the_cpu(tmp_path):
    env = dict(os.environ, TILECRAFT_AUTO_TUNING_MAX_CPU_COUNT="2")
    proc = run_python([sys.executable, str(ROOT / "examples" / "autotune_gemm.py")], cwd=ROOT, env=env, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "autotune_gemm: OK" in out
    assert "baseline:" in out and "| reference" in out and "Best config:" in out
    assert "Traceback" not in proc.stderr

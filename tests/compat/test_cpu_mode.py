"""CPU mode (tilecraft/compat/cpu_mode.py): a program written for CUDA runs unchanged on the CPU
target -- through `tilecraft run --cpu`, through TILECRAFT_RUN_ON_CPU=1, and in-process; with
`--also-compile sm_90a` a CUDA lowering's refusal is an error at the user's line."""
from __future__ import annotations

import os
import sys
import textwrap
import time

import pytest

from fresh_python import run_python  # tests/: a fresh process without paying `import torch`
import torch

import tilecraft
from tilecraft.compat import cpu_mode
from tilecraft.target import Target, cuda_available

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A program as TileLang users write it for a GPU: every tensor on "cuda", guarded on torch.cuda, timed
# with CUDA events; it checks its own result against torch on fresh random inputs.
CUDA_PROGRAM = textwrap.dedent('''
    import sys
    import torch
    import tilelang
    import tilelang.language as T

    @tilelang.jit(out_idx=[-1], target="cuda")
    def scale_add(M, N, block_M=32, block_N=64):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                A_s = T.alloc_shared((block_M, block_N), "float32")
                T.copy(A[by * block_M, bx * block_N], A_s)
                for i, j in T.Parallel(block_M, block_N):
                    C[by * block_M + i, bx * block_N + j] = A_s[i, j] * 2.0 + B[by * block_M + i, bx * block_N + j]
        return main

    if not torch.cuda.is_available():
        sys.exit("needs CUDA")
    torch.cuda.manual_seed(0)
    major, minor = torch.cuda.get_device_capability()
    a = torch.randn(100, 200, device="cuda")
    b = torch.randn(100, 200).cuda()
    kernel = scale_add(100, 200)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    c = kernel(a, b)
    end.record()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a * 2 + b)
    print(f"ok device={c.device} sm={major}{minor} ms={start.elapsed_time(end) >= 0}")
    print(kernel.get_plan())
''')

# compiles for the CPU (no shared-memory limit there) but not for sm_90a: 512 KiB of shared memory
TOO_MUCH_SHARED = textwrap.dedent('''
    import torch
    import tilelang
    import tilelang.language as T

    @tilelang.jit(out_idx=[-1])
    def copy(N, block=128):
        @T.prim_func
        def main(A: T.Tensor((N, 1024), "float32"), C: T.Tensor((N, 1024), "float32")):
            with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
                S = T.alloc_shared((block, 1024), "float32")
                T.copy(A[bx * block, 0], S)
                T.copy(S, C[bx * block, 0])
        return main

    a = torch.randn(256, 1024, device="cuda")
    torch.testing.assert_close(copy(256)(a), a)
    print("ran")
''')


def _run(args, tmp_path, source, env=None, timeout=300):
    prog = tmp_path / "prog.py"
    prog.write_text(source)
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("TILECRAFT_RUN_ON_CPU", "TILECRAFT_ALSO", "TILECRAFT_CPU_ARCH"))}
    full_env.update(PYTHONPATH=ROOT + os.pathsep + full_env.get("PYTHONPATH", ""), **(env or {}))
    return run_python([sys.executable, *[str(prog) if a == "PROG" else a for a in args]], cwd=tmp_path,
                      env=full_env, timeout=timeout)


def test_tilecraft_run_cpu_runs_a_cuda_program_unchanged(tmp_path):
    r = _run(["-m", "tilecraft", "run", "--cpu", "PROG"], tmp_path, CUDA_PROGRAM)
    assert r.returncode == 0, r.stderr
    assert "ok device=cpu sm=90 ms=True" in r.stdout
    assert "compiled for cpu" in r.stdout


def test_without_cpu_mode_the_same_program_does_not_pretend(tmp_path):
    """CPU mode is opt-in: the alias alone leaves torch.cuda as it is (no GPU here: the guard stops it)."""
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    r = _run(["-m", "tilecraft", "run", "PROG"], tmp_path, CUDA_PROGRAM)
    assert r.returncode != 0 and "needs CUDA" in r.stderr


def test_the_environment_variable_installs_cpu_mode_at_import(tmp_path):
    """TILECRAFT_RUN_ON_CPU=1 for programs started another way: here `python prog.py` with the alias
    installed by a one-line prelude (what run.sh's sitecustomize does)."""
    source = "import tilecraft.compat; tilecraft.compat.install()\n" + CUDA_PROGRAM
    r = _run(["PROG"], tmp_path, source, env={"TILECRAFT_RUN_ON_CPU": "1"})
    assert r.returncode == 0, r.stderr
    assert "ok device=cpu" in r.stdout


@pytest.mark.cuda_compile
def test_also_compile_reports_a_cuda_refusal_at_the_users_line(tmp_path):
    r = _run(["-m", "tilecraft", "run", "--cpu", "PROG"], tmp_path, TOO_MUCH_SHARED)
    assert r.returncode == 0 and "ran" in r.stdout, r.stderr    # the CPU target alone accepts it
    r = _run(["-m", "tilecraft", "run", "--cpu", "--also-compile", "sm_90a", "PROG"], tmp_path, TOO_MUCH_SHARED)
    assert r.returncode != 0 and "ran" not in r.stdout
    assert "TilecraftError" in r.stderr and "sm_90a" in r.stderr and "--also-compile" in r.stderr
    # the error points at the tile that does not fit (its T.alloc_shared line)
    line = TOO_MUCH_SHARED.splitlines().index('            S = T.alloc_shared((block, 1024), "float32")') + 1
    assert f'prog.py", line {line}' in r.stderr, r.stderr


@pytest.mark.cuda_compile
def test_also_compile_keeps_the_cuda_plan_beside_the_cpu_kernel():
    """get_plan() shows the CPU kernel and the sm_90a build (TMA + wgmma for a Hopper GEMM); the
    kernel itself computes on the CPU and matches torch."""
    import tilecraft.kernels as K
    with cpu_mode.enabled(also_compile="sm_90a"):
        kernel = K.matmul(128, 96, 64, 64, 32, 32, dtype="float16")
        a = torch.randn(128, 64, dtype=torch.float16, device="cuda")
        b = torch.randn(64, 96, dtype=torch.float16, device="cuda")
        c = kernel(a, b)
    assert kernel.target.kind == "cpu" and c.device.type == "cpu"
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    plan = kernel.get_plan()
    assert "compiled for cpu" in plan and "sm_90a, also compiled, not launched" in plan
    assert "wgmma" in plan, plan


def test_tensors_asked_for_on_cuda_land_on_the_cpu():
    with cpu_mode.enabled():
        made = [torch.empty(3, device="cuda"), torch.zeros(3, device="cuda:0"), torch.ones(3, device=0),
                torch.randn(3, device=torch.device("cuda", 0)), torch.arange(4, device="cuda"),
                torch.tensor([1.0, 2.0], device="cuda"), torch.full((2,), 7.0, device="cuda", pin_memory=True),
                torch.randn(3).cuda(), torch.randn(3).cuda(0), torch.randn(3).to("cuda"),
                torch.randn(3).to(torch.device("cuda")), torch.randn(3).to(device="cuda", dtype=torch.float16),
                torch.randn(3).to("cuda", torch.float16), torch.randn(3).pin_memory(),
                torch.empty(2).new_zeros(4, device="cuda"), torch.zeros_like(torch.empty(2), device="cuda"),
                torch.nn.Linear(2, 2).cuda().weight, torch.nn.Linear(2, 2).to("cuda").weight]
        torch.set_default_device("cuda")
        try:
            made.append(torch.randn(3))
        finally:
            torch.set_default_device(None)
        with torch.device("cuda"):
            made.append(torch.empty(2))
        g = torch.Generator(device="cuda").manual_seed(3)
        made.append(torch.randn(3, generator=g, device="cuda"))
        assert isinstance(g, torch.Generator) and isinstance(torch.default_generator, torch.Generator)
        assert Target.resolve("cuda").kind == "cpu" and Target.resolve("auto").kind == "cpu"
        assert Target.resolve("sm_90a").kind == "cpu" and not cuda_available()
    assert all(t.device.type == "cpu" for t in made), [t.device for t in made]
    assert made[12].dtype == torch.float16 and made[11].dtype == torch.float16
    assert not cpu_mode.active() and Target.resolve("sm_90a").kind == "cuda"


def test_torch_cuda_bookkeeping_answers_and_is_restored():
    before = torch.cuda.is_available
    with cpu_mode.enabled():
        assert torch.cuda.is_available() and torch.cuda.device_count() == 1 and torch.cuda.current_device() == 0
        assert torch.cuda.get_device_capability() == (9, 0) and "sm_90a" in torch.cuda.get_device_name(0)
        props = torch.cuda.get_device_properties(0)
        assert (props.major, props.minor, props.multi_processor_count) == (9, 0, 132)
        torch.cuda.set_device(0)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        assert torch.cuda.max_memory_allocated() == 0
        s = torch.cuda.Stream()
        with torch.cuda.stream(s), torch.cuda.device(0):
            s.wait_stream(torch.cuda.current_stream())
        torch.cuda.manual_seed(5)
        x = torch.randn(4, device="cuda")
        torch.cuda.manual_seed_all(5)
        assert torch.equal(x, torch.randn(4, device="cuda"))   # the generator "cuda" tensors come from
    assert torch.cuda.is_available is before


def test_cuda_random_tensors_leave_the_cpu_generator_as_a_gpu_would():
    """A seeded program that draws "cuda" tensors and then CPU ones (DeepSeek's cu_seqlens: randn on
    cuda, then torch.randint on the CPU) sees the CPU draws it would see on a GPU machine."""
    torch.manual_seed(0)
    want = torch.randint(0, 4096, (2,))
    with cpu_mode.enabled():
        torch.manual_seed(0)
        q = torch.randn(64, 8, device="cuda")
        r = torch.rand(5, device="cuda")
        i = torch.randint(0, 9, (4,), device="cuda")
        p = torch.randperm(7, device="cuda")
        n = torch.normal(0.0, 1.0, (3,), device="cuda")
        like = torch.randn_like(q, device="cuda")
        got = torch.randint(0, 4096, (2,))
        assert torch.equal(got, want), (got, want)
        torch.manual_seed(0)   # seeds the "cuda" generator too, as torch.manual_seed seeds the GPU's
        assert torch.equal(q, torch.randn(64, 8, device="cuda"))
        state = torch.cuda.get_rng_state()
        a = torch.randn(3, device="cuda")
        torch.cuda.set_rng_state(state)
        assert torch.equal(a, torch.randn(3, device="cuda"))
        assert all(t.device.type == "cpu" for t in (q, r, i, p, n, like))


def test_cuda_events_time_on_the_host_clock():
    with cpu_mode.enabled():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with pytest.raises(RuntimeError, match="recorded"):
            start.elapsed_time(end)
        start.record()
        time.sleep(0.02)   # a lower bound the host clock must see, whatever the machine's load
        end.record()
        end.synchronize()
        assert start.elapsed_time(end) >= 19.0 and end.query()


def test_profiler_timings_use_the_host_clock_in_cpu_mode():
    import tilecraft.kernels as K
    with cpu_mode.enabled():
        kernel = K.vector_add(1024)
        from tilecraft.profiler import do_bench
        x = torch.randn(1024, device="cuda")
        assert do_bench(lambda: x * 2, warmup=1, rep=5) > 0   # CUDA events would fail: no GPU here
        assert kernel.target.kind == "cpu" and kernel.get_profiler().do_bench(warmup=1, rep=5) > 0


def test_also_compile_rejects_an_unknown_arch():
    with pytest.raises(ValueError, match="sm_91"):
        cpu_mode.install("sm_91")
    assert not cpu_mode.active()


DEMANDS_SM120 = textwrap.dedent('''
    import torch
    import tilelang
    cap = torch.cuda.get_device_capability()
    if cap < (12, 0):
        raise RuntimeError(f"SM120 or newer is required, got compute capability {cap}")
    print("sees", cap, torch.cuda.get_device_name(0))
''')


def test_the_reported_arch_is_a_knob(tmp_path):
    """A program that demands a newer GPU than CPU mode's default (sm_90a) sees the one asked for with
    `--arch` / TILECRAFT_CPU_ARCH; the default stays sm_90a (programs pick Hopper paths by it)."""
    r = _run(["-m", "tilecraft", "run", "--cpu", "PROG"], tmp_path, DEMANDS_SM120)
    assert r.returncode != 0 and "got compute capability (9, 0)" in r.stderr
    r = _run(["-m", "tilecraft", "run", "--cpu", "--arch", "sm_120", "PROG"], tmp_path, DEMANDS_SM120)
    assert r.returncode == 0 and "sees (12, 0) tilecraft CPU mode (sm_120)" in r.stdout, r.stderr
    source = "import tilecraft.compat; tilecraft.compat.install()\n" + DEMANDS_SM120
    r = _run(["PROG"], tmp_path, source, env={"TILECRAFT_RUN_ON_CPU": "1", "TILECRAFT_CPU_ARCH": "sm_100a"})
    assert r.returncode != 0 and "got compute capability (10, 0)" in r.stderr
    r = _run(["-m", "tilecraft", "run", "--cpu", "--arch", "sm_99", "PROG"], tmp_path, DEMANDS_SM120)
    assert r.returncode != 0 and "--arch sm_99: expected one of" in r.stderr

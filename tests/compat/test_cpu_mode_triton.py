"""CPU mode's part for Triton (tilecraft/compat/cpu_mode_triton.py): a Triton reference kernel on
bfloat16 runs in Triton's interpreter with a GPU's arithmetic (float32, rounded to bfloat16), where the
interpreter alone computes on the bit patterns."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROGRAM = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def k(a_ptr, b_ptr, dot_ptr, ew_ptr, lt_ptr, N: tl.constexpr):
        r = tl.arange(0, N)
        a = tl.load(a_ptr + r[:, None] * N + r[None, :])
        b = tl.load(b_ptr + r[:, None] * N + r[None, :])
        acc = tl.zeros([N, N], dtype=tl.float32)
        acc += tl.dot(a, b)                      # bfloat16 x bfloat16 -> float32
        tl.store(dot_ptr + r[:, None] * N + r[None, :], acc)
        e = tl.maximum(a * b + a - (-b), a / b)  # bfloat16 arithmetic, stored as bfloat16
        tl.store(ew_ptr + r[:, None] * N + r[None, :], e)
        tl.store(lt_ptr + r[:, None] * N + r[None, :], (a < b).to(tl.int8))

    N = 16
    torch.manual_seed(0)
    a = torch.randn(N, N, device="cuda").to(torch.bfloat16)
    b = torch.randn(N, N, device="cuda").to(torch.bfloat16)
    dot = torch.empty(N, N, device="cuda")
    ew = torch.empty(N, N, device="cuda", dtype=torch.bfloat16)
    lt = torch.empty(N, N, device="cuda", dtype=torch.int8)
    k[(1,)](a, b, dot, ew, lt, N=N)
    torch.testing.assert_close(dot, a.float() @ b.float(), rtol=1e-5, atol=1e-5)
    # each bfloat16 operation rounds, as on a GPU: compare with the same steps in torch
    ref = torch.maximum(((a * b) + a) - (-b), a / b)
    torch.testing.assert_close(ew, ref, rtol=1e-2, atol=1e-2)
    assert torch.equal(lt, (a < b).to(torch.int8)), "comparisons compare values, not bit patterns"
    print("bf16 ok")
''')


def test_triton_bfloat16_runs_with_a_gpus_arithmetic_in_cpu_mode(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TILECRAFT_RUN_ON_CPU", "TRITON_INTERPRET"))}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "tilecraft", "run", "--cpu", str(prog)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "bf16 ok" in r.stdout


def test_the_interpreter_patch_is_undone_on_uninstall():
    import triton.runtime.interpreter as interp

    from tilecraft.compat import cpu_mode
    before = interp.InterpreterBuilder.create_dot
    with cpu_mode.enabled():
        assert interp.InterpreterBuilder.create_dot is not before
    assert interp.InterpreterBuilder.create_dot is before


def test_a_long_interpreter_launch_reports_its_progress(monkeypatch, capfd):
    import triton.runtime.interpreter as interp

    from tilecraft.compat import cpu_mode, cpu_mode_triton
    monkeypatch.setattr(cpu_mode_triton, "PROGRESS_SECONDS", 0.0)
    with cpu_mode.enabled():
        b = interp.InterpreterBuilder()
        b.set_grid_dim(10, 1, 1)        # few programs: quiet
        b.set_grid_idx(0, 0, 0)
        assert "interpreter" not in capfd.readouterr().err
        b.set_grid_dim(64, 64, 2)
        b.set_grid_idx(0, 0, 0)
        b.set_grid_idx(1, 0, 0)
        assert b.grid_idx == (1, 0, 0)   # the interpreter's own bookkeeping still happens
    err = capfd.readouterr().err
    assert "2 of 8,192" in err, err

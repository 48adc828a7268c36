"""tests/fresh_python.py's forked "fresh process" gives what a real `python ...` subprocess gives: the same
status, output and error text, argv, sys.path[0], __main__, exit handlers and timeouts.  The programs
here do not import torch, so the real subprocess beside each is cheap."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import fresh_python
from fresh_python import run_python

SCRIPT = textwrap.dedent("""\
    import atexit, os, sys, threading, time
    atexit.register(lambda: print("atexit ran"))
    threading.Thread(target=lambda: (time.sleep(0.2), print("thread joined"))).start()
    print(__name__, sys.argv[1:], sys.path[0] == os.path.dirname(os.path.realpath(__file__)), os.getcwd())
    print("env", os.environ.get("FRESH_PYTHON_PROBE"), "tilecraft" in sys.modules)
    if len(sys.argv) > 1 and sys.argv[1] == "fail":
        def inner():
            raise KeyError("inner")
        inner()
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
""")


def _both(args, **kw):
    real = subprocess.run(args, capture_output=True, text=True, **kw)
    forked = run_python(args, **kw)
    return real, forked


@pytest.mark.parametrize("code", [
    "import sys; print(sys.argv, repr(sys.path[0]), __name__); print('err', file=sys.stderr)",
    "raise ValueError('boom')",
    "x = (",
    "import sys; sys.exit('a message')",
    "import os, signal; os.kill(os.getpid(), signal.SIGTERM)",
])
def test_dash_c_matches_a_real_process(code):
    real, forked = _both([sys.executable, "-c", code, "x", "y"])
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)


@pytest.mark.parametrize("argv", [["ok", "3"], ["fail"]])
def test_a_script_matches_a_real_process(tmp_path, argv):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, FRESH_PYTHON_PROBE="seen")
    real, forked = _both([sys.executable, str(script), *argv], env=env, cwd=str(tmp_path))
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)
    assert "atexit ran" in forked.stdout and "thread joined" in forked.stdout and "env seen False" in forked.stdout


def test_dash_m_runs_the_module_as_main(tmp_path):
    (tmp_path / "probe_mod.py").write_text("import sys\nprint(__name__, sys.argv[1:], sys.argv[0].endswith('probe_mod.py'))\n")
    real, forked = _both([sys.executable, "-m", "probe_mod", "a"], cwd=str(tmp_path))
    assert forked.stdout == real.stdout == "__main__ ['a'] True\n" and forked.returncode == real.returncode == 0


def test_pythonpath_is_the_childs_own(tmp_path):
    (tmp_path / "only_here.py").write_text("VALUE = 41\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = run_python([sys.executable, "-c", "import only_here; print(only_here.VALUE + 1)"], env=env)
    assert out.returncode == 0 and out.stdout == "42\n", out.stderr
    assert run_python([sys.executable, "-c", "import only_here"]).returncode == 1


def test_a_timeout_kills_the_child_and_raises_like_subprocess():
    with pytest.raises(subprocess.TimeoutExpired) as e:
        run_python([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"], timeout=1)
    assert e.value.output == b"started\n"   # bytes, as subprocess.run gives them on a timeout
    assert run_python([sys.executable, "-c", "print('next')"]).stdout == "next\n"  # the server still serves


def test_an_environment_that_changes_interpreter_start_gets_a_server_started_with_it(monkeypatch):
    """OMP_NUM_THREADS is read when torch starts: the child comes from a server started with the value,
    so torch sees it as in a real process; a non-plain command is a real subprocess."""
    calls = []
    real_run = subprocess.run
    monkeypatch.setattr(fresh_python.subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    code = "import os, torch; print(os.environ['OMP_NUM_THREADS'], torch.get_num_threads())"
    env = dict(os.environ, OMP_NUM_THREADS="1")   # torch alone would take both cores here
    forked = run_python([sys.executable, "-c", code], env=env)
    assert forked.stdout == "1 1\n" and not calls, forked.stderr
    run_python([sys.executable, "-X", "utf8", "-c", "pass"])
    assert len(calls) == 1


def test_the_child_is_its_own_process_group():
    out = run_python([sys.executable, "-c", "import os; print(os.getpgid(0) == os.getpid(), os.getppid() != 1)"])
    assert out.stdout == "True True\n"

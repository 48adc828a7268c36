"""Every script under examples/ runs as a user would run it (a fresh `python examples/x.py`),
checks itself against torch, exits 0 and says so.  Autotuning examples are left to the autotuner's
own tests (they take minutes)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from fresh_python import run_python  # tests/: a fresh process without paying `import torch`

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("autotune"))


def test_examples_exist():
    names = {p.name for p in EXAMPLES}
    assert {"quickstart.py", "flash_attention.py", "softmax_rmsnorm.py"} <= names


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_and_checks_itself(script):
    env = dict(os.environ)
    env.pop("TILECRAFT_DISABLE_CACHE", None)
    proc = run_python([sys.executable, str(script)], cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout}\n{proc.stderr}"
    assert "OK" in proc.stdout or "passed" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stderr

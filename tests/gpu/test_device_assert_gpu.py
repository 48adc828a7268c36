"""Device assertions on the GPU (CPU-target and compile-only twin: tests/language/test_device_assert.py):
holding ones cost nothing and the results match; a false one prints the program's file, line and
message with the thread's indices and fails the launch -- in a child process, since the trap ends
the CUDA context."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import tilecraft as tilelang

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "language"))
from test_device_assert import checked_program  # noqa: E402

pytestmark = pytest.mark.gpu

CHILD = """
import sys, torch
sys.path.insert(0, {lang!r})
import tilecraft as tilelang
from test_device_assert import checked_program
k = tilelang.compile(checked_program(64, 100), target="cuda")
x = torch.randint(0, 100, (256,), dtype=torch.int32, device="cuda")
x[130] = 1000
y = torch.empty_like(x)
try:
    k(x, y)
    torch.cuda.synchronize()
except Exception as e:
    print("LAUNCH FAILED:", type(e).__name__, flush=True)
    sys.exit(3)
print("NO FAILURE", flush=True)
"""


def test_holding_asserts_on_gpu():
    k = tilelang.compile(checked_program(64, 100), target="cuda")
    x = torch.randint(0, 100, (256,), dtype=torch.int32, device="cuda")
    y = torch.empty_like(x)
    k(x, y)
    assert torch.equal(y, 2 * x)


def test_a_false_assert_stops_the_kernel_with_its_line():
    code = CHILD.format(lang=os.path.abspath(os.path.join(HERE, "..", "language")))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([os.path.abspath(os.path.join(HERE, "..", "..")),
                                                                       os.environ.get("PYTHONPATH", "")])})
    out = r.stdout + r.stderr
    assert r.returncode == 3 and "LAUNCH FAILED" in out, out
    assert "tilecraft: device assertion failed at" in out and "X must stay below the limit" in out, out
    assert "test_device_assert.py:" in out and "BlockIdx=(2, 0, 0), ThreadIdx=(2, 0, 0)" in out, out

"""The OpenMP wait policy of the CPU target's kernels (runtime/openmp.py), in fresh interpreters.

torch bundles libgomp with the soname the kernels link against, so torch's operators and the kernels share
one runtime, which reads its wait policy once, when it is loaded.  `import tilecraft` before torch loads it
with OMP_WAIT_POLICY=PASSIVE (a waiting thread sleeps: GOMP_SPINCOUNT 0); torch imported first keeps
libgomp's spinning default (300,000 rounds), and tilecraft says so; a policy in the environment is the
user's.  Real subprocesses: what is tested is interpreter start (the fork server would start with torch
already imported)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROGRAM = r'''
import os, sys
if sys.argv[1] == "torch-first":
    import torch
import tilecraft
import tilecraft.language as T
import torch

@T.prim_func
def add_one(A: T.Tensor((4096,), "float32")):
    with T.Kernel(8, threads=128) as bx:
        for i in T.Parallel(512):
            A[bx * 512 + i] = A[bx * 512 + i] + 1

k = tilecraft.compile(add_one, target="cpu")
a = torch.zeros(4096)
k(a)
assert bool((a == 1).all())
from tilecraft.runtime.openmp import wait_policy
print("POLICY", wait_policy())
print("ENV", os.environ.get("OMP_WAIT_POLICY"))
'''


def _run(tmp_path, order: str, **env_extra):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(OMP_DISPLAY_ENV="verbose", **env_extra)   # libgomp prints its settings when it starts
    proc = subprocess.run([sys.executable, str(prog), order], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    spin = [ln.split("=")[1].strip().strip("'") for ln in proc.stderr.splitlines() if "GOMP_SPINCOUNT" in ln]
    policy = next(ln[len("POLICY "):] for ln in proc.stdout.splitlines() if ln.startswith("POLICY "))
    env_seen = next(ln[len("ENV "):] for ln in proc.stdout.splitlines() if ln.startswith("ENV "))
    return spin, policy, env_seen


@pytest.mark.cxx
def test_tilecraft_imported_first_makes_kernels_and_torch_wait_passively(tmp_path):
    spin, policy, env_seen = _run(tmp_path, "tilecraft-first")
    assert spin == ["0"], spin            # one libgomp in the process, started passive
    assert policy.startswith("PASSIVE"), policy
    assert env_seen == "None"             # the variable was set only while libgomp read it


@pytest.mark.cxx
def test_torch_imported_first_keeps_the_spinning_default_and_says_so(tmp_path):
    spin, policy, _ = _run(tmp_path, "torch-first")
    assert spin == ["300000"], spin
    assert policy.startswith("spin") and "OMP_WAIT_POLICY=PASSIVE" in policy, policy


@pytest.mark.cxx
def test_a_policy_in_the_environment_is_the_users(tmp_path):
    spin, policy, env_seen = _run(tmp_path, "tilecraft-first", OMP_WAIT_POLICY="ACTIVE")
    assert policy == "ACTIVE (set in the environment)" and env_seen == "ACTIVE"
    assert spin and spin != ["0"], spin


@pytest.mark.cxx
def test_an_empty_policy_variable_is_kept_as_it_was(tmp_path):
    spin, policy, env_seen = _run(tmp_path, "tilecraft-first", OMP_WAIT_POLICY="")
    assert policy.startswith("PASSIVE") and spin == ["0"], (policy, spin)
    assert env_seen == "", env_seen

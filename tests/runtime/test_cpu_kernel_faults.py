"""CPU-target kernels never take the Python process down: an integer division by a divisor that is
zero at run time (SIGFPE before) and a grid that is empty at run time become TilecraftErrors naming
the kernel, and the kernel stays usable.  (A constant zero divisor or grid size is refused when the
program is compiled: tests/language/test_validation.py.)  Each case runs in a child process first,
so a regression shows as a failed test, not a dead test run."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import tilecraft  # noqa: E402
import tilecraft.language as T  # noqa: E402
from tilecraft.errors import TilecraftError  # noqa: E402

pytestmark = pytest.mark.cxx

n = T.dynamic("n")


@T.prim_func
def divk(X: T.Tensor((64,), "int32"), D: T.Tensor((1,), "int32"), Y: T.Tensor((64,), "int32")):
    with T.Kernel(2, threads=32) as bx:
        for i in T.Parallel(32):
            Y[bx * 32 + i] = X[bx * 32 + i] // D[0] + (bx * 32 + i) % D[0]


@T.prim_func
def scale(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
    with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i < n:
                Y[bx * 64 + i] = X[bx * 64 + i] * 2.0


m = T.dynamic("m")


@T.prim_func
def grid_div(X: T.Tensor((n,), "float32"), W: T.Tensor((m,), "float32"), Y: T.Tensor((n,), "float32")):
    with T.Kernel(T.ceildiv(n, m), threads=32) as bx:   # m == 0: the division is in the grid itself
        for i in T.Parallel(32):
            if bx * m + i < n and i < m:
                Y[bx * m + i] = X[bx * m + i] + W[i]


def _survives(body: str):
    """Run `body` (after the definitions of this module) in a child process: it must exit normally."""
    src = f"import sys; sys.path.insert(0, {repr(__file__.rsplit('/', 1)[0])})\n" \
          f"from test_cpu_kernel_faults import *\n" + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"the process died (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def test_a_zero_runtime_divisor_is_an_error_naming_the_kernel_not_sigfpe():
    out = _survives("""
        k = tilecraft.compile(divk, target="cpu")
        try:
            k(torch.arange(64, dtype=torch.int32), torch.zeros(1, dtype=torch.int32), torch.zeros(64, dtype=torch.int32))
        except TilecraftError as e:
            print("refused:", e)
        """)
    assert "refused: divk: integer division by zero" in out, out


def test_the_divisions_still_compute_and_the_kernel_recovers():
    k = tilecraft.compile(divk, target="cpu")
    x = torch.arange(64, dtype=torch.int32) - 20
    want = torch.div(x, 3, rounding_mode="floor") + torch.arange(64, dtype=torch.int32) % 3
    y = torch.zeros(64, dtype=torch.int32)
    k(x, torch.tensor([3], dtype=torch.int32), y)
    assert torch.equal(y, want)
    with pytest.raises(TilecraftError, match=r"divk: integer division by zero: X\[bx \* 32 \+ i\] // D\[0\]"):
        k(x, torch.zeros(1, dtype=torch.int32), y)
    y.zero_()
    k(x, torch.tensor([3], dtype=torch.int32), y)   # the error state does not stick
    assert torch.equal(y, want)
    src = k.get_kernel_source()
    assert "tc::nonzero(D[0]" in src and "tc::nonzero" not in src.split("tc_entry")[0]


def test_a_zero_divisor_in_the_grid_is_an_error():
    out = _survives("""
        k = tilecraft.compile(grid_div, target="cpu")
        try:
            k(torch.ones(10), torch.ones(0), torch.zeros(10))
        except TilecraftError as e:
            print("refused:", e)
        """)
    assert "refused: grid_div: integer division by zero" in out, out


def test_an_empty_grid_at_run_time_is_an_error_as_on_cuda():
    """TileLang launches through CUDA, which refuses a grid with a zero dimension (our CUDA launcher
    raises CudaError, runtime/cuda_launch.py); the CPU target now says so too instead of silently
    running no block."""
    k = tilecraft.compile(scale, target="cpu")
    x, y = torch.randn(100), torch.zeros(100)
    k(x, y)
    assert torch.equal(y, x * 2)
    with pytest.raises(TilecraftError, match=r"scale: T.Kernel\(\(n \+ 63\) // 64\) has a grid dimension of 0 or "
                                             r"less at run time"):
        k(torch.zeros(0), torch.zeros(0))
    y.zero_()
    k(x, y)
    assert torch.equal(y, x * 2)


def test_constant_divisors_and_static_grids_generate_no_checks():
    @T.prim_func
    def plain(X: T.Tensor((64,), "int32"), Y: T.Tensor((64,), "int32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(32):
                Y[bx * 32 + i] = X[bx * 32 + i] // 3 + X[bx * 32 + i] % 5

    src = tilecraft.compile(plain, target="cpu").get_kernel_source()
    assert "tc::nonzero" not in src and "cpu_assert" not in src and "try {" not in src

"""CPU-target kernels never take the Python process down: an integer division by a divisor that is
zero at run time (SIGFPE before), a grid that is empty at run time and an on-chip tile whose memory
cannot be allocated (a null pointer used on the tile path, std::bad_alloc out of the OpenMP region in
the thread-level mode before) become TilecraftErrors naming the kernel (and the tile, its bytes and
its line), and the kernel stays usable -- on the tile path and in the thread-level mode
(`tc.cpu_threads`).  (A constant zero divisor or grid size, or tiles past the CPU target's budget,
are refused when the program is compiled: tests/language/test_validation.py and below.)  Each case
that could kill the process runs in a child process, so a regression shows as a failed test, not a
dead test run."""
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
    from fresh_python import run_python  # here: the child imports this module
    r = run_python([sys.executable, "-c", src], timeout=600)
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


THREADS = {"tc.cpu_threads": True}   # the thread-level mode: one fiber per CUDA thread
MODES = [pytest.param({}, id="tile-path"), pytest.param(THREADS, id="thread-level")]


def _line(needle: str) -> int:
    """The first line of this file that holds `needle` (the definition: the tests come after it)."""
    return next(i + 1 for i, t in enumerate(open(__file__).read().splitlines()) if needle in t)


@pytest.mark.parametrize("configs", MODES)
def test_an_empty_grid_at_run_time_is_an_error_as_on_cuda(configs):
    """TileLang launches through CUDA, which refuses a grid with a zero dimension (our CUDA launcher
    raises CudaError, runtime/cuda_launch.py); the CPU target says so too instead of silently
    running no block, in both of its modes, naming the kernel's line."""
    k = tilecraft.compile(scale, target="cpu", pass_configs=configs)
    assert ("one fiber per CUDA thread" in k.get_kernel_source()) == bool(configs)
    x, y = torch.randn(100), torch.zeros(100)
    k(x, y)
    assert torch.equal(y, x * 2)
    line = _line("with T.Kernel(T.ceildiv(n, 64)")
    with pytest.raises(TilecraftError, match=rf"scale: T.Kernel\(\(n \+ 63\) // 64\) at .*test_cpu_kernel_faults.py:"
                                             rf"{line} has a grid dimension of 0 or less at run time"):
        k(torch.zeros(0), torch.zeros(0))
    y.zero_()
    k(x, y)
    assert torch.equal(y, x * 2)


# ---- on-chip tiles whose memory cannot be had --------------------------------------------------------

BIG = 1 << 27   # float32 elements: 512 MiB, within the CPU target's 1 GiB per block


@T.prim_func
def big_shared(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((BIG,), "float32")
        for i in T.Parallel(256):
            S[i * 4096] = X[i]
        for i in T.Parallel(256):
            Y[i] = S[i * 4096] * 2.0


LOCAL = 1 << 20   # float32 elements per thread: 4 MiB, 512 MiB over the block's 128 threads


@T.prim_func
def big_local(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        L = T.alloc_local((LOCAL,), "float32")
        L[LOCAL - 1] = X[tx]
        Y[tx] = L[LOCAL - 1] * 2.0


def _out_of_memory(fn: str, configs: dict) -> str:
    """Compile `fn`, call it once with the address space capped 256 MiB above what the process maps
    (the tile cannot be allocated), then once without the cap: prints what each call did."""
    return _survives(f"""
        import resource
        k = tilecraft.compile({fn}, target="cpu", pass_configs={configs!r})
        x = torch.randn({256 if fn == "big_shared" else 128})
        y = torch.zeros_like(x)
        size = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size + (256 << 20), resource.RLIM_INFINITY))
        try:
            k(x, y)
            print("ran")
        except TilecraftError as e:
            print("refused:", e)
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        k(x, y)
        print("then:", bool(torch.equal(y, x * 2)))
        """)


@pytest.mark.parametrize("configs", MODES)
def test_a_shared_tile_that_cannot_be_allocated_is_an_error_naming_it(configs):
    out = _out_of_memory("big_shared", configs)
    line = _line("S = T.alloc_shared((BIG,)")
    if configs:   # the block's shared memory: one buffer, its tiles named
        want = (f"refused: big_shared: out of memory: could not allocate the block's {BIG * 4} bytes of shared "
                f"memory: the shared tiles S ({BIG},) float32 ({BIG * 4} bytes at test_cpu_kernel_faults.py:{line})")
    else:
        want = (f"refused: big_shared: out of memory: could not allocate the shared tile S ({BIG},) float32 at "
                f"{__file__}:{line} (`S = T.alloc_shared((BIG,), \"float32\")`): {BIG * 4} bytes")
    assert want in out, out
    assert "then: True" in out, out   # the kernel recovers once the memory is there


def test_threads_whose_stacks_cannot_be_allocated_are_an_error_naming_their_arrays():
    """The thread-level mode keeps each thread's local arrays on its fiber's stack."""
    out = _out_of_memory("big_local", THREADS)
    line = _line("L = T.alloc_local((LOCAL,)")
    assert ("refused: big_local: out of memory: could not allocate the stacks of the block's 128 threads (128 x "
            in out), out
    assert (f"each thread's arrays take {LOCAL * 4} bytes, the largest L ({LOCAL},) float32 ({LOCAL * 4} bytes at "
            f"test_cpu_kernel_faults.py:{line})") in out, out
    assert "then: True" in out, out


def test_tiles_past_the_budget_count_each_threads_own_arrays_in_the_thread_level_mode():
    """1 GiB of on-chip memory per block: the tile path holds a local array once per block, the
    thread-level mode once per thread."""
    @T.prim_func
    def locals8(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            L = T.alloc_local((1 << 21,), "float32")   # 8 MiB a thread, 1 GiB + over 128 threads
            L2 = T.alloc_local((2,), "float32")
            L[0] = X[tx]
            L2[0] = L[0]
            Y[tx] = L2[0] * 2.0

    line = _line("L = T.alloc_local((1 << 21")
    with pytest.raises(TilecraftError, match=r"on-chip tiles take 1 GiB per block on the CPU target \(at most 1 GiB\): "
                                             r"L \(2097152,\) float32 alone is 1 GiB \(8192 KiB in each of the "
                                             r"block's 128 threads") as e:
        tilecraft.compile(locals8, target="cpu", pass_configs=THREADS)
    assert e.value.span is not None and e.value.span.line == line


def test_constant_divisors_and_static_grids_generate_no_checks():
    @T.prim_func
    def plain(X: T.Tensor((64,), "int32"), Y: T.Tensor((64,), "int32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(32):
                Y[bx * 32 + i] = X[bx * 32 + i] // 3 + X[bx * 32 + i] % 5

    src = tilecraft.compile(plain, target="cpu").get_kernel_source()
    assert "tc::nonzero" not in src and "cpu_assert" not in src and "try {" not in src


def test_a_kernel_moved_down_its_file_reports_its_new_line(tmp_path):
    """The generated code names the user's lines (here the empty grid's T.Kernel) and the program
    text does not: the disk cache keys on the lines too (compiler/build.py, span_token), so the same
    program moved down its file is not served with its old line."""
    import linecache
    import runpy
    path = tmp_path / "moved.py"
    body = textwrap.dedent('''
        import tilecraft.language as T
        n = T.dynamic("n")

        @T.prim_func
        def moved(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
                for i in T.Parallel(32):
                    if bx * 32 + i < n:
                        Y[bx * 32 + i] = X[bx * 32 + i] + 1.0
        ''')
    for pad in (0, 3):
        path.write_text("\n" * pad + body)
        linecache.checkcache(str(path))
        fn = runpy.run_path(str(path))["moved"]
        k = tilecraft.compile(fn, target="cpu")
        line = pad + 1 + body.splitlines().index("    with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:")
        with pytest.raises(TilecraftError, match=rf"moved.py:{line} has a grid dimension of 0"):
            k(torch.zeros(0), torch.zeros(0))

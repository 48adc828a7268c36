"""`tilecraft.runtime.cuda_launch.CudaLauncher` on hand-written CUDA kernels (independent of the
code generator): results vs torch, symbolic grids, >48 KiB dynamic shared memory, streams, error
paths that must leave the process usable, and the host time per launch.

All marked `gpu` (skipped without one); the metadata/grid checks that need no GPU are in
tests/runtime/test_cuda_launcher_nogpu.py.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tilecraft.profiler.bench import host_time_us

torch = pytest.importorskip("torch")

from tilecraft.compiler.build import Artifact  # noqa: E402
from tilecraft.compiler.cuda import compile_cuda  # noqa: E402
from tilecraft.runtime.cuda_driver import CudaError  # noqa: E402
from tilecraft.runtime.cuda_launch import CudaLauncher  # noqa: E402
from tilecraft.target import Target  # noqa: E402

gpu = pytest.mark.gpu

VADD = r"""
extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""

# Each block reverses a chunk of CHUNK floats through dynamic shared memory (all of it used).
REVERSE = r"""
extern "C" __global__ void chunk_reverse(const float* __restrict__ x, float* __restrict__ y,
                                         int n, int chunk) {
  extern __shared__ float buf[];
  long base = (long)blockIdx.x * chunk;
  for (int i = threadIdx.x; i < chunk; i += blockDim.x)
    buf[i] = base + i < n ? x[base + i] : 0.0f;
  __syncthreads();
  for (int i = threadIdx.x; i < chunk; i += blockDim.x)
    if (base + i < n) y[base + i] = buf[chunk - 1 - i];
}
"""


def _params(n):
    return [SimpleNamespace(name=f"p{i}") for i in range(n)]


def _launcher(source, kernel_name, nparams, symbols, grid, block, smem=0, kinds=None, arch=None, grid_exprs=None):
    """Build an Artifact the way compiler.build would (cubin + meta) and wrap it in a launcher."""
    if arch is None:
        from tilecraft.target import current_cuda_arch
        arch = current_cuda_arch()
    target = Target("cuda", arch)
    binary = compile_cuda(source, target, {}) if source else b""
    meta = {"kernel_name": kernel_name, "grid": grid, "block": block, "smem_bytes": smem}
    if grid_exprs is not None:   # the launch record's expression trees (tilecraft/launch.py)
        meta["grid_exprs"] = grid_exprs
    if kinds is not None:
        meta["param_kinds"] = kinds
    artifact = Artifact(target, source, meta, binary=binary)
    return CudaLauncher(artifact, SimpleNamespace(name=f"tc_{kernel_name}"), _params(nparams), symbols)


# ---- on the GPU -----------------------------------------------------------------------------
def _vadd_launcher():
    return _launcher(VADD, "vadd", 3, ["n"], ["(n + 255) // 256", 1, 1], [256, 1, 1],
                     kinds=["ptr", "ptr", "ptr", "int32"], grid_exprs=[["//", ["+", "n", 255], 256], 1, 1])


@gpu
@pytest.mark.parametrize("n", [1, 255, 257, 4096, 1_000_003])
def test_vector_add_symbolic_grid(n):
    la = _vadd_launcher()
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.full_like(a, float("nan"))
    la([a, b, c], {"n": n}, "tc_vadd")
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)


@gpu
def test_one_launcher_many_sizes_and_streams():
    la = _vadd_launcher()
    side = torch.cuda.Stream()
    for n in (1000, 77, 123_457):
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        c = torch.full_like(a, float("nan"))
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the launcher follows torch's current stream
            la([a, b, c], {"n": n}, "tc_vadd")
        torch.cuda.current_stream().wait_stream(side)
        torch.testing.assert_close(c, a + b, rtol=0, atol=0)
        d = torch.full_like(a, float("nan"))
        side.wait_stream(torch.cuda.current_stream())  # d's fill runs on the current stream first
        la([a, b, d], {"n": n}, "tc_vadd", stream=side)  # an explicit torch.cuda.Stream
        side.synchronize()
        torch.testing.assert_close(d, a + b, rtol=0, atol=0)


@gpu
def test_dynamic_shared_memory_above_48k():
    from tilecraft.runtime.cuda_driver import device_properties
    props = device_properties(torch.cuda.current_device())
    smem = min(100 * 1024, props.max_shared_per_block_optin)
    assert smem > 48 * 1024, props
    chunk = smem // 4
    n = 3 * chunk + 1234
    la = _launcher(REVERSE, "chunk_reverse", 2, ["n", "chunk"], ["(n + chunk - 1) // chunk", 1, 1],
                   [512, 1, 1], smem=smem, kinds=["ptr", "ptr", "int32", "int32"],
                   grid_exprs=[["//", ["-", ["+", "n", "chunk"], 1], "chunk"], 1, 1])
    x = torch.randn(n, device="cuda")
    y = torch.full_like(x, float("nan"))
    la([x, y], {"n": n, "chunk": chunk}, "tc_chunk_reverse")
    torch.cuda.synchronize()
    padded = torch.zeros(4 * chunk, device="cuda")
    padded[:n] = x
    expect = padded.view(4, chunk).flip(1).reshape(-1)[:n]
    torch.testing.assert_close(y, expect, rtol=0, atol=0)


@gpu
def test_errors_name_the_kernel_and_leave_the_process_usable():
    n = 4096
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    la = _vadd_launcher()
    with pytest.raises(CudaError, match="tc_vadd"):  # 0 blocks
        la([a[:0], b[:0], c[:0]], {"n": 0}, "tc_vadd")
    with pytest.raises(CudaError, match="tc_vadd"):  # missing symbol
        la([a, b, c], {}, "tc_vadd")
    too_many_threads = _launcher(VADD, "vadd", 3, ["n"], ["(n + 2047) // 2048", 1, 1], [2048, 1, 1],
                                 kinds=["ptr", "ptr", "ptr", "int32"],
                                 grid_exprs=[["//", ["+", "n", 2047], 2048], 1, 1])
    with pytest.raises(CudaError, match="vadd"):  # rejected by the driver
        too_many_threads([a, b, c], {"n": n}, "tc_vadd")
    too_much_smem = _launcher(REVERSE, "chunk_reverse", 2, ["n", "chunk"], [1, 1, 1], [128, 1, 1],
                              smem=1024 * 1024, kinds=["ptr", "ptr", "int32", "int32"])
    with pytest.raises(CudaError, match="chunk_reverse"):
        too_much_smem([a, c], {"n": n, "chunk": 256}, "tc_chunk_reverse")
    with pytest.raises(CudaError, match="tc_vadd"):  # int32 overflow of a symbol
        la([a, b, c], {"n": 2**40}, "tc_vadd")
    # ... and the context is still fine for this kernel, a new one, and torch
    c.fill_(float("nan"))
    la([a, b, c], {"n": n}, "tc_vadd")
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)
    c2 = torch.full_like(a, float("nan"))
    _vadd_launcher()([a, b, c2], {"n": n}, "tc_vadd")
    torch.testing.assert_close(c2, a + b, rtol=0, atol=0)
    assert torch.allclose((a * 2).sum(), a.sum() * 2)


_host_us = host_time_us  # one definition, in tilecraft.profiler


@gpu
def test_host_overhead_per_launch():
    n = 1024
    la = _vadd_launcher()
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    syms = {"n": n}
    launch_only = _host_us(lambda: la([a, b, c], syms, "tc_vadd"))

    def with_alloc():  # what JITKernel adds at least: the output allocation and a symbols dict
        out = torch.empty(n, dtype=torch.float32, device=a.device)
        la([a, b, out], {"n": a.shape[0]}, "tc_vadd")
        return out

    alloc = _host_us(with_alloc)
    ref = _host_us(lambda: torch.add(a, b))
    print(f"\nhost us/launch: launcher only {launch_only:.2f}, launcher + output alloc {alloc:.2f}, "
          f"torch.add {ref:.2f} (ratio {alloc / ref:.2f})")
    assert launch_only < 4 * ref, (launch_only, ref)  # generous: a regression guard, not the goal

"""Concurrency on the GPU: kernels compiled from 8 threads at once, and the same kernels launched
from 8 Python threads each on its own CUDA stream, give the results one thread gives (the CPU
twin is tests/runtime/test_threads.py).  Not yet run on hardware when written.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import tilecraft as tilelang
from tilecraft.kernels import gemm, norm

pytestmark = pytest.mark.gpu
THREADS = 8


def _all_at_once(fn, args):
    start = threading.Barrier(len(args))

    def run(a):
        start.wait()
        return fn(*a)
    with ThreadPoolExecutor(len(args)) as pool:
        return list(pool.map(run, args))


def test_compiling_for_the_gpu_from_8_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))   # a cold cache: every compile is real
    sizes = [(128 + 16 * t, 96 + 8 * t, 64 + 32 * t) for t in range(THREADS)]
    kernels = _all_at_once(lambda m, n, k: tilelang.compile(
        gemm.matmul.fn(m, n, k, block_M=64, block_N=64, block_K=32, num_stages=2), out_idx=[-1], target="cuda"),
        sizes)
    for (m, n, k), kern in zip(sizes, kernels):
        a, b = torch.randn(m, k, device="cuda").half(), torch.randn(k, n, device="cuda").half()
        torch.testing.assert_close(kern(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("configs", [pytest.param({}, id="default"),
                                     pytest.param({"tc.use_wgmma": True, "tc.wgmma_async": True, "tc.use_tma": True},
                                                  id="wgmma-tma", marks=pytest.mark.sm90)])
def test_one_kernel_launched_from_8_threads_on_8_streams(configs):
    kern = tilelang.compile(gemm.matmul.fn(512, 384, 256, block_M=128, block_N=128, block_K=32, num_stages=3),
                            out_idx=[-1], target="cuda", pass_configs=configs)
    soft = tilelang.compile(norm.softmax.fn(256, 1024, dtype="float32"), out_idx=[-1], target="cuda")
    ins = [(torch.randn(512, 256, device="cuda").half(), torch.randn(256, 384, device="cuda").half(),
            torch.randn(256, 1024, device="cuda")) for _ in range(THREADS)]
    torch.cuda.synchronize()

    def work(a, b, x):
        stream = torch.cuda.Stream()
        outs = []
        with torch.cuda.stream(stream):
            for _ in range(20):   # many launches: interleavings get their chance
                outs.append((kern(a, b), soft(x)))
        stream.synchronize()
        return outs
    results = _all_at_once(work, ins)
    for (a, b, x), outs in zip(ins, results):
        want_c, want_s = a.float() @ b.float(), torch.softmax(x, 1)
        for c, s in outs:
            torch.testing.assert_close(c.float(), want_c, rtol=1e-2, atol=1e-2)
            torch.testing.assert_close(s, want_s, rtol=1e-5, atol=1e-6)

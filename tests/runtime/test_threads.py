"""Concurrency (CPU tier): kernels compiled from 8 threads at once, and the same kernels called
from 8 threads at once, give the results a single thread gives.

What is shared between threads and must be safe: the parser's stack of active parsers (macros
inline into the parser of *their* thread), pass state (insert_syncs' shared-memory ranges), the
jit factories' kernel caches, the disk cache, and a kernel's launcher (the CPU launcher's
argument arrays are per thread).  The GPU twin is tests/gpu/test_threads_gpu.py.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.kernels import attention, gemm, norm
from tilecraft.target import Target
from tilecraft.testing.fuzz_build import lower

THREADS = 8


@T.macro
def scaled(x, s):
    return x * s


@tilelang.jit(out_idx=[-1], target="cpu")
def scale_rows(M, N, s, block_M=8):
    """A macro whose inlining needs this thread's parser; `s` differs per compile."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=64) as bx:
            f = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], f)
            for i, j in T.Parallel(block_M, N):
                f[i, j] = scaled(f[i, j], s) + j
            T.copy(f, Y[bx * block_M, 0])
    return main


def _all_at_once(fn, args):
    """fn(*a) for each a in args, from THREADS threads released together; results in order."""
    start = threading.Barrier(len(args))

    def run(a):
        start.wait()
        return fn(*a)
    with ThreadPoolExecutor(len(args)) as pool:
        return list(pool.map(run, args))


def test_parsing_and_compiling_from_8_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))   # a cold cache: every compile is real
    scales = [0.5 * (t + 1) for t in range(THREADS)]
    kernels = _all_at_once(lambda s: scale_rows(37, 24, s), [(s,) for s in scales])
    x = torch.randn(37, 24)
    for s, k in zip(scales, kernels):
        torch.testing.assert_close(k(x), x * s + torch.arange(24.0), rtol=1e-6, atol=1e-6)


def test_the_same_kernel_compiled_by_8_threads_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    kernels = _all_at_once(lambda: scale_rows(45, 16, 3.0), [()] * THREADS)
    x = torch.randn(45, 16)
    for k in kernels:
        torch.testing.assert_close(k(x), x * 3.0 + torch.arange(16.0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("arch,configs", [("sm_80", {}), ("sm_90a", {}),
                                          ("sm_90a", {"tc.use_wgmma": True, "tc.wgmma_async": True, "tc.use_tma": True})],
                         ids=["sm_80", "sm_90a", "sm_90a-wgmma-tma"])
def test_cuda_lowering_from_8_threads_is_what_one_thread_generates(arch, configs):
    """The passes are re-entrant (pipeline_copies' rebuilt gemms and insert_syncs' shared-memory
    ranges were module state once): pipelined GEMMs, reused shared memory and cross-warp
    reductions lowered by 16 threads at once print the source one thread prints."""
    target = Target.resolve({"kind": "cuda", "arch": arch})
    funcs = [norm.softmax.fn(64, 8192, block_M=1, threads=256), norm.rmsnorm.fn(64, 4096),
             gemm.matmul.fn(256, 256, 256), attention.flash_attention.fn(1, 2, 256, 64, is_causal=True),
             gemm.matmul_bias_gelu.fn(256, 256, 128)]
    alone = [lower(f, target, configs) for f in funcs]
    jobs = [(funcs[t % len(funcs)],) for t in range(THREADS * 2)]
    together = _all_at_once(lambda f: lower(f, target, configs), jobs)
    for (f,), src in zip(jobs, together):
        assert src == alone[funcs.index(f)], f"{f.name}: lowering differs when threads compile at once"


def test_one_kernel_called_from_8_threads_at_once():
    k = tilelang.compile(gemm.matmul.fn(96, 80, 64, block_M=32, block_N=32, block_K=16, num_stages=2),
                         out_idx=[-1], target="cpu")
    ins = [(torch.randn(96, 64).half(), torch.randn(64, 80).half()) for _ in range(THREADS)]

    def calls(a, b):
        return [k(a, b) for _ in range(20)]   # many calls: interleavings get their chance
    outs = _all_at_once(calls, ins)
    for (a, b), results in zip(ins, outs):
        want = a.float() @ b.float()
        for c in results:
            torch.testing.assert_close(c.float(), want, rtol=1e-2, atol=1e-2)

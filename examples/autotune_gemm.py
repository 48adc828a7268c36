"""Autotuning a GEMM, in both of TileLang's spellings, written exactly as for TileLang.

1. The decorator: ``@tilelang.autotune(configs=..., warmup=..., rep=...)`` stacked above
   ``@tilelang.jit``, tuned on the caller's own tensors with ``set_autotune_inputs``.
2. The programmatic API: ``AutoTuner.from_kernel(...).set_compile_args(...).set_profile_args(...).run()``,
   every config checked against a reference program.

Each prints the change-one-thing table (``result.table()``): the baseline config in full, then
what every other config changes, its latency and how it compares with the best and with torch.

Runs on the GPU when there is one (2048^3, up to 8 configs), otherwise on the CPU target
(128^3, 3 configs: the CPU target is the reference implementation, so small sizes).  A second
run finds the results in the on-disk cache and is instant; ``TILECRAFT_AUTO_TUNING_DISABLE_CACHE=1``
(or the ``TILELANG_`` spelling) turns that off.

    python examples/autotune_gemm.py
"""
import time

import torch

import tilecraft as tilelang
import tilecraft as tl
import tilecraft.language as T
from tilecraft.autotuner import AutoTuner, set_autotune_inputs

GPU = torch.cuda.is_available()
DEV = torch.device("cuda" if GPU else "cpu")
if GPU:
    CC = torch.cuda.get_device_capability(0)
    SM = CC[0] * 10 + CC[1]
    SMEM_CAP = 48 * 1024 if SM < 80 else 96 * 1024
    DEFAULT_STAGES = 2 if SM < 80 else 3
    M = N = K = 2048
    MAX_CONFIGS = 8
else:
    SMEM_CAP, DEFAULT_STAGES = 96 * 1024, 2
    M = N = K = 128
    MAX_CONFIGS = 3


def check(actual, ref, name, tol=2e-2):
    """Relative Frobenius error: far more meaningful than atol for fp16."""
    a, r = actual.float(), ref.float()
    rel = float((a - r).norm() / r.norm().clamp_min(1e-12))
    ok = rel < tol
    print(f"   [{'PASS' if ok else 'FAIL'}] {name}: rel_err={rel:.3e}")
    return ok


def smem_bytes(bm, bn, bk, stages, elem=2):
    return stages * (bm * bk + bk * bn) * elem


def configs():
    """The search space: tile sizes, K-block, pipeline depth, threads; within the shared-memory budget."""
    tiles = ((64, 128), (128, 256)) if GPU else ((32, 64), (64, 128))
    out = []
    for bm in tiles[0]:
        for bn in tiles[1]:
            for bk in (32, 64):
                for stages in (2, DEFAULT_STAGES):
                    for thr in (128, 256):
                        if smem_bytes(bm, bn, bk, stages) > SMEM_CAP:
                            continue
                        cfg = dict(block_M=bm, block_N=bn, block_K=bk, num_stages=stages, threads=thr)
                        if cfg not in out:
                            out.append(cfg)
    return out[:MAX_CONFIGS]


# ---------------------------------------------------------------- 1. @tilelang.autotune above @jit
SPACE = configs()


@tilelang.autotune(configs=SPACE, warmup=10, rep=20)
@tilelang.jit(out_idx=[-1])
def tuned_matmul(M: int, N: int, K: int,
                 block_M: int = 128, block_N: int = 128, block_K: int = 32,
                 num_stages: int = 2, threads: int = 128,
                 dtype: str = "float16", accum_dtype: str = "float"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype),
             B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


def section_decorator() -> bool:
    print(f"1. @tilelang.autotune: searching {len(SPACE)} configurations for {M}x{N}x{K} fp16 on {DEV.type}")
    a = torch.randn(M, K, device=DEV, dtype=torch.float16)
    b = torch.randn(K, N, device=DEV, dtype=torch.float16)
    t0 = time.time()
    with set_autotune_inputs(a, b):
        best = tuned_matmul(M, N, K)
    print(f"   tuning took {time.time() - t0:.1f} s")
    tuned_matmul.last_result.table()
    c = best(a, b)
    ok = check(c, (a.float() @ b.float()).half(), "autotuned matmul")
    ms = best.get_profiler().do_bench(lambda: best(a, b), warmup=3, rep=10)
    print(f"   best kernel: {ms:.3f} ms -> {2 * M * N * K / (ms * 1e-3) / 1e12:.4f} TFLOP/s")
    return ok


# ---------------------------------------------------------------- 2. AutoTuner.from_kernel
def make_kernel(M, N, K, dtype="float16", accum_dtype="float"):
    """``my_kernel`` takes only the tuned parameters (the sizes are fixed by the closure) and
    returns a prim_func; out_idx and target come from ``set_compile_args``."""
    def my_kernel(block_M=64, block_N=64, block_K=32, num_stages=2, threads=128):
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
                A_shared = T.alloc_shared((block_M, block_K), dtype)
                B_shared = T.alloc_shared((block_K, block_N), dtype)
                C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
                T.clear(C_local)
                for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[by * block_M, ko * block_K], A_shared)
                    T.copy(B[ko * block_K, bx * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C[by * block_M, bx * block_N])
        return main
    return my_kernel


def ref_program(A, B):
    return A @ B if A.is_cuda else (A.float() @ B.float()).to(A.dtype)


def section_programmatic() -> bool:
    my_kernel = make_kernel(M, N, K)
    cfgs = configs()
    print(f"\n2. AutoTuner.from_kernel: searching {len(cfgs)} configurations, each checked against torch")
    autotuner = (
        AutoTuner.from_kernel(my_kernel, cfgs)
        .set_compile_args(out_idx=[-1], target="auto")
        .set_profile_args(
            supply_type=tl.TensorSupplyType.Integer,
            ref_prog=ref_program,
            warmup=3,
            rep=20,
        )
    )
    result = autotuner.run()
    result.table()
    print(f"   Best config: {result.config}")
    print(f"   Best latency: {result.latency:.4f} ms")
    best_kernel = result.kernel
    a = torch.randn(M, K, device=DEV, dtype=torch.float16)
    b = torch.randn(K, N, device=DEV, dtype=torch.float16)
    return check(best_kernel(a, b), ref_program(a, b), "AutoTuner best kernel")


def main():
    ok = section_decorator()
    ok = section_programmatic() and ok
    print("\nRe-running this script hits the on-disk autotuner cache and is instant.")
    print("Turn caching off with TILELANG_AUTO_TUNING_DISABLE_CACHE=1.")
    print("autotune_gemm: OK" if ok else "autotune_gemm: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

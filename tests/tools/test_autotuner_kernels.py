"""The autotuner on real kernels compiled for the CPU target (the jit factory and compile paths)."""


import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.autotuner import AutoTuner, autotune, set_autotune_inputs
from tilecraft.compiler.cache import cache_info
from tilecraft.ir.func import PrimFunc
from tilecraft.profiler import TensorSupplyType

M = N = K = 64
FAST = dict(warmup=1, rep=4)


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    for name in ("TILECRAFT_DISABLE_CACHE", "TILELANG_DISABLE_CACHE", "TILECRAFT_AUTO_TUNING_DISABLE_CACHE",
                 "TILELANG_AUTO_TUNING_DISABLE_CACHE", "TILELANG_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILECRAFT_AUTO_TUNING_MAX_CPU_COUNT", "2")


def matmul_program(M, N, K, block_M=32, block_N=32, block_K=32, scale=1.0, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_f = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            for i, j in T.Parallel(block_M, block_N):
                C_f[i, j] = C_f[i, j] * scale
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


matmul = tilelang.jit(out_idx=[-1], target="cpu")(matmul_program)

CONFIGS = [
    {"block_M": 32, "block_N": 32},
    {"block_M": 16, "block_N": 64},
    {"block_M": 64, "block_N": 16},
    {"block_M": 32, "block_N": 32, "dtype": "float13"},  # compile error
    {"block_M": 32, "block_N": 32, "scale": 2.0},  # wrong answers
]


def ref(a, b):
    return a @ b


def test_jit_factory_parallel_compile_check_and_cache():
    result = (AutoTuner.from_kernel(matmul, CONFIGS).set_kernel_parameters((M, N, K), {})
              .set_profile_args(supply_type=TensorSupplyType.Normal, ref_prog=ref, rtol=1e-4, atol=1e-4, **FAST)
              .run())
    assert [r.status for r in result.all_results] == ["ok", "ok", "ok", "compile error", "mismatch"]
    assert "float13" in result.all_results[3].reason
    assert "output 'C'" in result.all_results[4].reason
    assert result.config in CONFIGS[:3]
    a, b = torch.randn(M, K), torch.randn(K, N)
    torch.testing.assert_close(result.kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert isinstance(result.func, PrimFunc) and result.func is result.kernel.func
    assert "main" in result.libcode
    # four programs compiled: three good ones and the wrong one; those built by the workers were
    # cache hits for the parent
    assert cache_info("kernels")["entries"] == 4
    for cfg in (CONFIGS[1], CONFIGS[2], CONFIGS[4]):
        assert matmul(M, N, K, **cfg).artifact.from_cache, cfg
    again = (AutoTuner.from_kernel(matmul, CONFIGS).set_kernel_parameters((M, N, K), {})
             .set_profile_args(supply_type=TensorSupplyType.Normal, ref_prog=ref, rtol=1e-4, atol=1e-4, **FAST)
             .run())
    assert again.from_cache and again.config == result.config


def test_plain_function_with_compile_args():
    configs = [{"block_M": 32, "block_N": 32}, {"block_M": 16, "block_N": 16}]
    result = (AutoTuner.from_kernel(matmul_program, configs).set_kernel_parameters((M, N, K), {})
              .set_compile_args(out_idx=[-1], target="cpu")
              .set_profile_args(ref_prog=ref, rtol=1e-4, atol=1e-4, **FAST)
              .run())
    assert all(r.ok for r in result.all_results)
    assert result.func is not None and result.kernel.device_type == "cpu"
    a, b = torch.randn(M, K), torch.randn(K, N)
    torch.testing.assert_close(result.kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_decorator_stacked_on_jit_with_inputs():
    @autotune(configs=[{"block_M": 32}, {"block_M": 16}], ref_prog=ref, rtol=1e-4, atol=1e-4, **FAST)
    @tilelang.jit(out_idx=[-1], target="cpu")
    def tuned(M, N, K, block_M=64, block_N=32, block_K=32):
        return matmul_program(M, N, K, block_M, block_N, block_K)

    a, b = torch.randn(M, K), torch.randn(K, N)
    with set_autotune_inputs(a, b):
        best = tuned(M, N, K)
    assert tuned.last_result.config in ({"block_M": 32}, {"block_M": 16})
    torch.testing.assert_close(best(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert tuned(M, N, K) is not None
    profiler = best.get_profiler()
    assert profiler.do_bench(n_warmup=1, n_repeat=2) > 0
    profiler.assert_allclose(ref, rtol=1e-4, atol=1e-4)


def test_autotune_is_exported_from_the_package():
    assert tilelang.autotune is autotune
    assert tilelang.autotuner.set_autotune_inputs is set_autotune_inputs


PASS_CONFIG_SPACE = [
    {"block_M": 32, "block_N": 32, "pass_configs": {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}},
    {"block_M": 32, "block_N": 32, "pass_configs": {"tl.no_such_option": True}},  # refused: its own compile error
]


def test_a_configs_pass_configs_reach_its_compile_in_api_mode():
    """TileLang's per-config compiler options in the search space (example_gemm_autotune_pass_configs):
    `"pass_configs"` is not a kernel argument; each config compiles with its own options."""
    result = (AutoTuner.from_kernel(matmul_program, PASS_CONFIG_SPACE).set_kernel_parameters((M, N, K), {})
              .set_compile_args(out_idx=[-1], target="cpu")
              .set_profile_args(ref_prog=ref, supply_type=TensorSupplyType.Normal, **FAST)
              .run(enable_grouped_compile=True))
    good, bad = result.all_results
    assert good.status == "ok" and bad.status == "compile error" and "tl.no_such_option" in bad.reason
    assert result.kernel.pass_configs.get("tl.disable_warp_specialized") is True


def test_a_configs_pass_configs_reach_its_compile_in_decorator_mode():
    tuned = autotune(configs=PASS_CONFIG_SPACE, ref_prog=ref, supply_type=TensorSupplyType.Normal, **FAST)(matmul)
    kernel = tuned(M, N, K)
    assert tuned.last_result.config["pass_configs"] == PASS_CONFIG_SPACE[0]["pass_configs"]
    assert kernel.pass_configs.get("tl.disable_warp_specialized") is True
    assert tuned.last_result.all_results[1].status == "compile error"

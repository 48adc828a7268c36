"""`T.gemm_sp` compiles for sm_80 and sm_90a in the tile shapes TileLang's sparse examples use
(examples/gemm_sp, examples/sparse_tensorcore), and `get_plan()` says honestly how it runs: A is
decompressed into a dense shared tile and multiplied by the dense gemm (for a float32 accumulator on
mma.sync on sm_80, wgmma on sm_90a), no `mma.sp` yet.  The generated source shows the decompression loop and,
on sm_90a, the proxy fence that makes its generic stores visible to wgmma.  The results against
torch: tests/cpu/test_gemm_sp.py (CPU and, on a GPU, CUDA) and tests/gpu/test_gemm_sp_gpu.py."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_gemm_sp import gemm_sp_kernel  # noqa: E402

pytestmark = pytest.mark.cuda_compile

# (M, N, K, bm, bn, bk, meta, stages, accum, out, threads, policy): the examples' configurations
CONFIGS = {
    "h20-fp32acc": (1024, 1024, 1024, 128, 64, 128, "uint8", 3, "float32", None, 128, "Square"),
    "4090-fp16acc": (1024, 1024, 1024, 256, 128, 64, "int16", 2, "float16", None, 128, "Square"),
    "4090-fp32acc": (1024, 1024, 1024, 128, 64, 64, "int16", 1, "float32", None, 128, "Square"),
    "sparse-tensorcore": (512, 1024, 768, 128, 128, 128, "uint8", 2, "float32", "float16", 128, "Square"),
}


def compile_config(name, arch):
    M, N, K, bm, bn, bk, meta, stages, accum, out, threads, policy = CONFIGS[name]
    fn = gemm_sp_kernel.fn(M, N, K, bm, bn, bk, "float16", meta, stages=stages, accum=accum, out=out,
                           threads=threads, policy=policy)
    return tilelang.compile(fn, out_idx=[-1], target={"kind": "cuda", "arch": arch})


@pytest.mark.parametrize("arch,path", [("sm_80", "mma.sync"), ("sm_90a", "wgmma")])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_gemm_sp_compiles_and_plan_says_decompressed(name, arch, path):
    if arch == "sm_80" and name == "4090-fp16acc":
        pytest.skip("its 168 KB of shared memory is over sm_80's 163 KB (the example targets sm_89 / sm_90)")
    k = compile_config(name, arch)
    plan = k.get_plan()
    assert "gemm_sp: A decompressed from A_sparse and E into a dense shared tile" in plan, plan
    assert "not yet sparse-fast: no mma.sp" in plan, plan
    if CONFIGS[name][8] == "float32":  # (tilecraft's dense gemm has no tensor-core path for a float16 accumulator)
        assert f"on {path}" in plan, plan
    src = k.get_kernel_source()
    assert "a_s_dense" in src and "mma.sp" not in src
    if arch == "sm_90a" and "on wgmma" in plan:
        dense_store = src.index("a_s_dense[")
        assert src.index("fence_proxy_async_shared", dense_store) < src.index("gemm_ss_sm90", dense_store)

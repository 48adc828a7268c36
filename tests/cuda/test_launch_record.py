"""The launch record of a generated CUDA kernel (tilecraft/launch.py), read from the IR: the grid as
expression trees evaluated with the call's sizes (no text compiled), parameter kinds in order, and
the header features the source defines (no scan of the generated text).  Code generation only."""
from __future__ import annotations

import random

import tilecraft.language as T
from tilecraft.codegen.cuda import generate_cuda
from tilecraft.compiler.build import effective_pass_configs
from tilecraft.launch import Grid, HeaderFeature, LaunchRecord, ParamKind, grid_of_meta
from tilecraft.target import Target
from tilecraft.transform.pipeline import run_pipeline

SM80 = Target.resolve({"kind": "cuda", "arch": "sm_80"})


def generate(func, target=SM80):
    return generate_cuda(run_pipeline(func, target, effective_pass_configs(None, target)), target)


def scale(dtype="float32", block=128):
    n = T.dynamic("n")
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, n), dtype), Y: T.Tensor((m, n), dtype)):
        with T.Kernel(T.ceildiv(n, block), T.ceildiv(m, 4), threads=block) as (bx, by):
            for i, j in T.Parallel(4, block):
                if by * 4 + i < m and bx * block + j < n:
                    Y[by * 4 + i, bx * block + j] = X[by * 4 + i, bx * block + j] * 2
    return main


def test_symbolic_grid_is_a_tree_evaluated_like_the_program_says():
    src, rec = generate(scale())
    assert isinstance(rec, LaunchRecord) and rec.grid.static is None
    assert rec.param_kinds == (ParamKind.PTR, ParamKind.PTR, ParamKind.INT32, ParamKind.INT32)
    meta = rec.to_meta()
    back = grid_of_meta(meta)                  # as the launcher reads it from the cache entry
    rng = random.Random(5)
    for _ in range(50):
        m, n = rng.randint(1, 10**6), rng.randint(1, 10**6)
        assert back({"m": m, "n": n}) == rec.grid({"m": m, "n": n}) == (-(-n // 128), -(-m // 4), 1)
    assert HeaderFeature.FP8 not in rec.features and "#define TC_FP8" not in src


def test_static_grid_and_fp8_feature_from_the_ir():
    def fixed(dtype):
        @T.prim_func
        def main(X: T.Tensor((256,), dtype), Y: T.Tensor((256,), "float32")):
            with T.Kernel(2, threads=128) as bx:
                for i in T.Parallel(128):
                    Y[bx * 128 + i] = T.cast(X[bx * 128 + i], "float32")
        return main
    src, rec = generate(fixed("float8_e4m3fn"))
    assert rec.grid == Grid((2, 1, 1), (2, 1, 1)) and "grid_exprs" not in rec.to_meta()
    assert rec.features == {HeaderFeature.FP8} and src.count("#define TC_FP8\n") == 1
    src, rec = generate(fixed("float16"))
    assert not rec.features and "TC_FP8" not in src

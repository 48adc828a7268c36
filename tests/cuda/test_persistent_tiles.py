"""Persistent tiles (transform/pipelining/persistent.py, a form of pipeline_copies on sm_90a), checked
without a GPU: which kernels walk their tiles ("auto" and True) and which do not, that the walk
visits every tile exactly once in the order asked for (launch order, T.use_swizzle's panels, ragged
panels), the generated structure (one block per SM, the ring counting across tiles, the next tile's
first k-tiles issued from this tile's last iterations, nothing aliasing the ring), and that it
compiles for sm_90a to TMA + wgmma without spills; and what the plan says of the forms a GEMM loop does not
take.  The GPU run is tests/gpu/test_persistent_tiles_gpu.py."""
from __future__ import annotations

import re

import pytest

import tilecraft as tilelang
from tilecraft.ir import Binary, Const, Var
from tilecraft.kernels.gemm import matmul, matmul_bias_gelu
from tilecraft.transform.pipelining.persistent import tile_coords

SM90 = {"kind": "cuda", "arch": "sm_90a"}
SM80 = {"kind": "cuda", "arch": "sm_80"}
ON, OFF = {"tc.persistent_tiles": True}, {"tc.persistent_tiles": False}
BIG = (128, 256, 64, 3, 256)


def _value(e, env):
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return env[e]
    assert isinstance(e, Binary), e
    a, b = _value(e.a, env), _value(e.b, env)
    return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else None, "%": a % b if b else None,
            "min": min(a, b), "max": max(a, b)}[e.op]


@pytest.mark.parametrize("gx,gy,panel", [(32, 64, 10), (17, 17, 10), (5, 23, 4), (32, 64, None), (7, 3, None)])
def test_the_walk_visits_every_tile_once(gx, gy, panel):
    t = Var("t")
    cx, cy = tile_coords(t, gx, gy, panel)
    seen = [(_value(cx, {t: i}), _value(cy, {t: i})) for i in range(gx * gy)]
    assert sorted(seen) == [(x, y) for x in range(gx) for y in range(gy)]
    if panel:   # the panel order codegen gives a launched grid: down `panel` block-rows, then right
        assert seen[:3] == [(0, 0), (0, 1), (0, 2)][:min(3, gy)]
    else:
        assert seen[:2] == [(0, 0), (1, 0)]


def _kernel(func, configs=None, target=SM90):
    return tilelang.compile(func, out_idx=[-1], target=target, pass_configs=configs)


def test_gelu_at_the_benchmark_shape_walks_its_tiles():
    k = _kernel(matmul_bias_gelu.get_tir(8192, 8192, 2048, *BIG))
    plan, src = k.get_plan(), k.get_kernel_source()
    assert "persistent: 132 blocks walk the 2048 tiles" in plan, plan
    assert k.artifact.meta["grid"] == [132, 1, 1]
    assert "for (int tile_it = 0; tile_it < 16; ++tile_it)" in src
    assert "if (((tile_block + (tile_it * 132)) < 2048))" in src   # 132 does not divide 2048
    # the ring's count runs across tiles; the refill past this tile's k-tiles loads the next tile's
    assert "tc::mbar_wait_parity((&tma_bar[(((tile_it * 32) + ko) % 3)]), ((((tile_it * 32) + ko) / 3) % 2))" in src
    assert "(((ko + 2) - 32) * 64)" in src and "((tile_block + ((tile_it + 1) * 132)) < 2048)" in src
    # barriers set up once, before the walk; nothing re-initialised per tile
    assert src.count("tc::mbar_init(") == 3 and src.index("tc::mbar_init(") < src.index("tile_it = 0")
    # the epilogue's staging tile does not reuse the ring's bytes (the next tile lands during the epilogue)
    offs = {m.group(1): int(m.group(2)) for m in re.finditer(r"\* __restrict__ (\w+) = .*tc_smem \+ (\d+)\)", src)}
    ring = sorted([(offs["A_shared"], offs["A_shared"] + 3 * 128 * 64 * 2),
                   (offs["B_shared"], offs["B_shared"] + 3 * 64 * 256 * 2)])
    stage = (offs["C_local_stage"], offs["C_local_stage"] + 128 * 264 * 2)
    assert all(stage[1] <= lo or stage[0] >= hi for lo, hi in ring), (offs, ring, stage)


@pytest.mark.sass   # cuobjdump and nvdisasm (tests/conftest.py)
def test_walked_kernel_compiles_to_tma_and_wgmma_without_spills():
    from tilecraft.compiler.sass import resource_usage
    k = _kernel(matmul_bias_gelu.get_tir(8192, 8192, 2048, *BIG))
    sass = k.get_sass()
    assert "UTMALDG" in sass and "HGMMA" in sass
    usage = next(iter(resource_usage(k.artifact.binary).values()))
    assert usage["local_bytes"] == 0, f"accumulators spilled to local memory: {usage}"


@pytest.mark.parametrize("M,N,K,cfg,why", [
    (2048, 4096, 2048, BIG, "256 tiles: under two waves of 132"),
    (8192, 8192, 8192, BIG, "128 k-tiles"),
    (8192, 8192, 2048, (128, 128, 32, 3, 128), "a 96 KB ring leaves room for a second block"),
    (1024, 1024, 2048, BIG, "32 tiles: fewer than the SMs"),
])
def test_auto_keeps_one_block_per_tile(M, N, K, cfg, why):
    assert "blocks walk the" not in _kernel(matmul.get_tir(M, N, K, *cfg)).get_plan(), why


def test_true_walks_where_auto_does_not_and_false_or_sm80_never():
    assert "blocks walk the" in _kernel(matmul.get_tir(4096, 4096, 4096, *BIG)).get_plan()   # auto: 64 k-tiles
    assert "persistent: 132 blocks walk the 2048 tiles" in _kernel(matmul.get_tir(8192, 8192, 8192, *BIG), ON).get_plan()
    func = matmul_bias_gelu.get_tir(8192, 8192, 2048, *BIG)
    off = _kernel(func, OFF)
    assert "blocks walk the" not in off.get_plan() and off.artifact.meta["grid"] == [32, 64, 1]
    assert "tile_it" not in _kernel(func, ON, SM80).get_kernel_source()
    # a loop the TMA form does not take (no TMA) and the hand-split forms are left alone, and the plan says why
    no_tma = _kernel(func, {**ON, "tl.disable_tma_lower": True}).get_plan()
    assert "blocks walk the" not in no_tma and "tc.persistent_tiles True not taken: it needs TMA loads" in no_tma
    split = _kernel(func, {**ON, "tc.warp_specialize": True}).get_plan()
    assert "blocks walk the" not in split and "not taken: tc.warp_specialize True asks for" in split
    # "auto" declining, or False, says nothing of the walk
    assert "persistent_tiles" not in _kernel(matmul.get_tir(8192, 8192, 8192, *BIG)).get_plan()
    assert "persistent_tiles" not in off.get_plan()
    one_wave = _kernel(matmul.get_tir(1024, 1024, 2048, *BIG), ON).get_plan()
    assert "not taken: 32 tiles fill no more than one wave of 132 SMs" in one_wave, one_wave


def test_the_plan_says_why_auto_leaves_a_loop_unsplit():
    """Issue 9: a loop that falls back says which way and why (here: "auto" declining the producer warpgroup)."""
    big = _kernel(matmul.get_tir(8192, 8192, 8192, *BIG)).get_plan()   # 128 k-tiles: no walk either
    assert 'no producer warpgroup (tc.warp_specialize "auto": a one-gemm loop ran faster unsplit' in big, big
    assert "warp-specialized" not in big
    split = _kernel(matmul.get_tir(8192, 8192, 8192, *BIG), {"tc.warp_specialize": True}).get_plan()
    assert "warp-specialized" in split and "no producer warpgroup" not in split
    assert "no producer warpgroup" not in _kernel(matmul_bias_gelu.get_tir(8192, 8192, 2048, *BIG)).get_plan()


@pytest.mark.parametrize("M,N,K,trans_b,dtype,swizzle", [
    (2176, 4352, 192, False, "float16", True), (2000, 4000, 320, False, "float16", True),
    (2048, 4096, 256, True, "bfloat16", False), (4096, 2048, 1024, False, "float16", False),
])
def test_the_gpu_twins_programs_walk_and_compile(M, N, K, trans_b, dtype, swizzle):
    """The programs tests/gpu/test_persistent_tiles_gpu.py runs, compiled here for sm_90a."""
    func = matmul.get_tir(M, N, K, *BIG, trans_B=trans_b, dtype=dtype, use_swizzle=swizzle)
    k = _kernel(func, ON)
    src = k.get_kernel_source()
    tiles = -(-M // 128) * -(-N // 256)
    assert f"persistent: 132 blocks walk the {tiles} tiles" in k.get_plan()
    assert ("tc::floordiv" in src) == swizzle        # panel order divides by the panel's rows
    assert k.artifact.meta["grid"] == [132, 1, 1] and k.artifact.binary


def test_a_tile_read_outside_the_loop_keeps_one_block_per_tile():
    """The next tile's first k-tiles land in the ring during this tile's epilogue: a program that reads a
    ring tile after the loop (here: A's last k-tile, copied out) must not walk, even when asked to."""
    import tilecraft.language as T
    M, N, K = 8192, 8192, 2048

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16"),
             D: T.Tensor((M, 64), "float16")):
        with T.Kernel(N // 256, M // 128, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 256), "float16")
            C_f = T.alloc_fragment((128, 256), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(K // 64, num_stages=3):
                T.copy(A[by * 128, ko * 64], A_s)
                T.copy(B[ko * 64, bx * 256], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 128, bx * 256])
            T.copy(A_s, D[by * 128, 0])
    plan = _kernel(main, ON).get_plan()
    assert "blocks walk the" not in plan and "not taken: a tile the main loop loads is used outside it" in plan, plan
    assert "blocks walk the" in _kernel(matmul.get_tir(M, N, K, *BIG), ON).get_plan()   # the same GEMM without the read


def test_true_says_why_a_copy_indexed_by_memory_does_not_walk():
    """A grouped GEMM whose tiles' rows and groups come from tables in memory: its copies cannot load ahead
    (the next tile's source is read from memory), so True is not taken, and the plan says so."""
    import tilecraft.language as T
    M, N, K, G = 4096, 4096, 2048, 8

    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((G, K, N), "bfloat16"), Row0: T.Tensor((40,), "int32"),
             Group: T.Tensor((40,), "int32"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(N // 128, 40, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "bfloat16")
            B_s = T.alloc_shared((64, 128), "bfloat16")
            C_f = T.alloc_fragment((128, 128), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(K // 64, num_stages=3):
                T.copy(A[Row0[by], ko * 64], A_s)
                T.copy(B[Group[by], ko * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[Row0[by], bx * 128])
    plan = _kernel(main, ON).get_plan()
    assert "blocks walk the" not in plan
    assert "not taken: the main loop must be tile copies from global memory that can load ahead" in plan, plan

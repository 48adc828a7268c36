"""Compile-only (no GPU): issue 25's reference kernels generated and compiled for sm_90a, and the path
each gemm takes, read from the plan and the SASS: FlashAttention backward (all five gemms on wgmma, the
dQ accumulation as global reductions), FP8 GEMMs (wgmma's k32 e4m3/e5m2 form: QGMMA in the SASS; off wgmma
mma.sync m16n8k32, QMMA on sm_89; a layout neither can read falls back with the reason in the plan), decode attention (GQA split-KV; MLA bf16 and fp8 KV on wgmma with the warpgroups along N; the combine) and
the grouped GEMM (wgmma, the group found by a scan).  The GPU twin is tests/gpu/test_new_kernels_gpu.py.""" 
from __future__ import annotations

import re

import pytest

import tilecraft as tilelang
from tilecraft.kernels import attention_bwd as A
from tilecraft.kernels import decode as D
from tilecraft.kernels import gemm_fp8 as G
from tilecraft.kernels import grouped_gemm as GG

pytestmark = pytest.mark.cuda_compile
SM90 = {"kind": "cuda", "arch": "sm_90a"}



def sm90(factory, *args, **kwargs):
    kw = factory.compile_kwargs
    return tilelang.compile(factory.fn(*args, **kwargs), out_idx=kw["out_idx"], target=SM90,
                            pass_configs=kw["pass_configs"])


def no_spills(kernel):
    from tilecraft.compiler.sass import resource_usage
    usage = next(iter(resource_usage(kernel.artifact.binary).values()))
    assert usage["local_bytes"] == 0, f"spilled to local memory: {usage}"


def opcodes(kernel) -> set:
    return set(re.findall(r"\b([A-Z][A-Z0-9]+)(?:\.[A-Z0-9.]+)?\b", kernel.get_sass()))


# ---- FlashAttention backward ----------------------------------------------------------------------
@pytest.mark.sass
def test_attention_backward_d64_causal_all_gemms_on_wgmma():
    k = sm90(A.flash_attention_bwd, 2, 4, 1000, 64, True, block_M=64, block_N=64, num_stages=2)
    plan = k.get_plan()
    assert plan.count("on wgmma") == 5 and "mma.sync" not in plan, plan
    assert plan.count("A from registers") == 2, plan   # dV += P^T dO and dK += dS^T Q read P^T / dS^T from registers
    ops = opcodes(k)
    # wgmma gemms; dQ added by TMA tensor reduces (transform/cuda_ops/tma_reduce.py)
    assert "HGMMA" in ops and "UTMAREDG" in ops, "wgmma gemms; dQ added by TMA tensor reduces"
    no_spills(k)


def test_attention_backward_d128_plan_and_preprocess():
    plan = sm90(A.flash_attention_bwd, 1, 2, 512, 128, False).get_plan()
    assert plan.count("on wgmma") == 5, plan
    for f in (A.flash_attention_bwd_preprocess, A.flash_attention_bwd_postprocess):
        assert "no T.gemm" in sm90(f, 1, 2, 500, 128).get_plan()
    fwd = sm90(A.flash_attention_fwd_lse, 1, 2, 500, 128, True).get_plan()
    assert fwd.count("on wgmma") == 2, fwd


# ---- FP8 GEMM -------------------------------------------------------------------------------------
@pytest.mark.parametrize("factory", [G.fp8_matmul, G.fp8_matmul_blockscaled])
def test_fp8_gemms_compile(factory):
    plan = sm90(factory, 256, 256, 384).get_plan()
    assert "T.gemm 128x128x128" in plan and "T.Pipelined, 3 stages" in plan, plan


@pytest.mark.sass
@pytest.mark.parametrize("factory", [G.fp8_matmul, G.fp8_matmul_blockscaled])
def test_fp8_gemms_on_wgmma(factory):
    k = sm90(factory, 256, 256, 384)
    plan = k.get_plan()
    assert "T.gemm 128x128x128 on wgmma" in plan and "scalar" not in plan, plan
    sass = k.get_sass()
    assert re.search(r"QGMMA\.64x128x32\.F32\.E4M3\.E4M3", sass), "fp8 wgmma (k32 e4m3) in the SASS"
    assert "HGMMA" not in sass
    if factory is G.fp8_matmul:
        no_spills(k)


def test_fp8_per_tensor_loads_by_tma():
    plan = sm90(G.fp8_matmul, 256, 256, 384).get_plan()
    assert "TMA tile loads" in plan and "one wgmma group kept in flight" in plan, plan


def test_fp8_block_scaled_loads_its_scale_row_by_tma():
    """The k-major activation scales make a k-block's scales for the tile's rows one contiguous run: the
    plain (unswizzled) 1-D scale tile is a TMA box beside the two wgmma operand tiles."""
    k = sm90(G.fp8_matmul_blockscaled, 1000, 256, 384)
    assert "TMA tile loads" in k.get_plan() and "not loaded by TMA" not in k.get_plan(), k.get_plan()
    src = k.get_kernel_source()
    assert len(re.findall(r"tc::tma_load_tile\(\(&sa_shared\[", src)) >= 1, "the scale row is a TMA box"
    rows_of_2_bytes = sm90(G.fp8_matmul_blockscaled, 1002, 256, 384).get_plan()   # 4008-byte scale rows: no map
    assert "Scales_A's rows are 4008 bytes, not a multiple of 16" in rows_of_2_bytes, rows_of_2_bytes


@pytest.mark.parametrize("fold_late", [False, True])
def test_block_scaled_fp8_with_two_groups_a_stage_folds_the_first_under_the_second(fold_late):
    src = sm90(G.fp8_matmul_blockscaled, 1024, 1024, 1024, k_blocks=2, fold_late=fold_late).get_kernel_source()
    loop = src[src.index("for (int ko = 0;"):]
    at = []
    marks = ["fp8_e4m3_t, 1, 128, 128>((&A_shared[", "fp8_e4m3_t, 1, 128, 128>((&A2_shared[",
             "tc::wgmma_wait<1, 64>((&C_part[0]))", "+ (C_part[", "tc::wgmma_wait<0, 64>((&C_part2[0]))",
             "+ (C_part2[", "tc::mbar_arrive_warp("]
    if fold_late:   # the previous stage's second partial folded between the gemms, under the first
        marks = marks[:1] + ["+ (C_part2["] + marks[1:4] + ["scale2[", "tc::wgmma_wait<0, 64>((&C_part2[0]))",
                                                              "tc::mbar_arrive_warp("]
    for mark in marks:
        at.append(loop.find(mark, at[-1] if at else 0))
    # both gemms issued (one group left in flight each), the first partial folded after one wait, the
    # second after the full wait (fold_late: at the next stage, under its first gemm), the stage released last
    assert -1 not in at and at == sorted(at), at


@pytest.mark.sass
@pytest.mark.parametrize("fold_late", [False, True])
def test_block_scaled_fp8_sass_issues_both_groups_before_the_full_wait(fold_late):
    sass = sm90(G.fp8_matmul_blockscaled, 1024, 1024, 1024, k_blocks=2, fold_late=fold_late).get_sass()
    body = sass[sass.index("QGMMA"):]
    first_full_wait = body.index("WARPGROUP.DEPBAR.LE gsb0, 0x0")
    assert body[:first_full_wait].count("QGMMA.64x128x32.F32.E4M3.E4M3") == 8, "two groups of four k32 steps"
    one_left = body.index("WARPGROUP.DEPBAR.LE gsb0, 0x1")
    assert body[:one_left].count("QGMMA") == 4 and "FFMA" in body[one_left:first_full_wait], \
        "the first partial's fold starts before the second group has retired"
    if fold_late:   # the previous stage's second partial is folded between the two groups' issue
        groups = [m.start() for m in re.finditer("QGMMA", body)]
        assert "FFMA" in body[groups[0]:groups[4]], "no fold between the first group's issue and the second's"


def test_tma_asked_on_sm80_says_sm80_has_none():
    from tilecraft.kernels import gemm
    k = tilelang.compile(gemm.matmul.fn(256, 256, 256), out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"},
                         pass_configs={"tc.use_tma": True})
    assert "tc.use_tma: sm_80 has no TMA (sm_90 and later)" in k.get_plan(), k.get_plan()


def _fp8_gemm(trans_b: bool, a_dtype="float8_e4m3fn", b_dtype="float8_e4m3fn", K=128, target=SM90):
    import tilecraft.language as T
    M = N = 128
    b_shape = (N, K) if trans_b else (K, N)

    @T.prim_func
    def main(A: T.Tensor((M, K), a_dtype), B: T.Tensor(b_shape, b_dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, K), a_dtype)
            B_s = T.alloc_shared(b_shape, b_dtype)
            C_l = T.alloc_fragment((M, N), "float32")
            T.clear(C_l)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l, transpose_B=trans_b)
            T.copy(C_l, C)
    return tilelang.compile(main, target=target)


@pytest.mark.sass
def test_fp8_e5m2_gemm_on_wgmma():
    k = _fp8_gemm(True, "float8_e5m2", "float8_e5m2")
    assert "on wgmma" in k.get_plan(), k.get_plan()
    assert re.search(r"QGMMA\.64x128x32\.F32\.E5M2\.E5M2", k.get_sass())


@pytest.mark.sass
@pytest.mark.parametrize("dtype, sass", [("float8_e4m3fn", r"QMMA\.16832\.F32\.E4M3\.E4M3"),
                                         ("float8_e5m2", r"QMMA\.16832\.F32\.E5M2\.E5M2")])
def test_fp8_gemm_on_sm89_takes_mma_sync_k32(dtype, sass):
    """Off wgmma, an 8-bit K-major gemm takes mma.sync m16n8k32 (sm_89+; gemm_sm80.h's F8Pair view)."""
    k = _fp8_gemm(True, dtype, dtype, target={"kind": "cuda", "arch": "sm_89"})
    assert "on mma.sync, 2x2 warps" in k.get_plan(), k.get_plan()
    assert re.search(sass, k.get_sass())


def test_fp8_gemm_off_wgmma_on_sm90a_takes_mma_sync():
    plan = sm90(G.fp8_matmul, 256, 256, 384, block_M=32, threads=128).get_plan()
    assert "T.gemm 32x128x128 on mma.sync, 1x4 warps" in plan, plan   # fewer than wgmma's 64 rows
    assert "block_M a multiple of 64" in plan, plan
    plan = sm90(G.fp8_matmul, 256, 256, 384, block_M=64, threads=256).get_plan()
    assert "T.gemm 64x128x128 on wgmma, 2 warpgroup(s), 2 along N" in plan, plan   # 64 rows: the warpgroups split N


def test_fp8_gemm_on_sm80_says_it_has_no_fp8_tensor_cores():
    plan = _fp8_gemm(True, target={"kind": "cuda", "arch": "sm_80"}).get_plan()
    assert "on scalar dot products" in plan and "sm_80 has no fp8 MMA" in plan, plan


@pytest.mark.parametrize("case, why", [
    (dict(trans_b=False), "must both be K-major"),
    (dict(trans_b=True, K=48), "not a multiple of 32"),
])
def test_fp8_gemm_without_a_wgmma_layout_falls_back_and_says_why(case, why):
    plan = _fp8_gemm(**case).get_plan()
    assert "on scalar dot products" in plan and why in plan, plan


# ---- decode attention -----------------------------------------------------------------------------
@pytest.mark.parametrize("paging", [{}, dict(page_size=64, num_pages=64)])
def test_gqa_decode_split_compiles_on_tensor_cores(paging):
    k = sm90(D.gqa_decode_split, 4, 32, 8, 4096, 128, 8, **paging)
    plan = k.get_plan()
    assert plan.count("T.gemm 16x64x128") == 1 and "scalar" not in plan, plan
    assert "no T.gemm" in sm90(D.decode_combine, 4, 32, 8, 128).get_plan()


@pytest.mark.parametrize("kv_dtype", ["bfloat16", "float8_e4m3fn"])
def test_mla_decode_on_wgmma(kv_dtype):
    """64 heads on two warpgroups: every gemm on wgmma with the warpgroups along N (P through shared memory)."""
    k = sm90(D.mla_decode_split, 2, 128, 4096, kv_dtype=kv_dtype)
    plan = k.get_plan()
    assert plan.count("on wgmma, 2 warpgroup(s), 2 along N") == 3 and "mma.sync" not in plan, plan
    no_spills(k)


# ---- grouped GEMM ---------------------------------------------------------------------------------
@pytest.mark.sass
def test_grouped_gemm_on_wgmma():
    k = sm90(GG.grouped_matmul, 4000, 1024, 512, 8, trans_B=True)
    plan = k.get_plan()
    assert "on wgmma" in plan, plan
    assert "HGMMA" in opcodes(k)
    # the group's weight tile is indexed by the group found before the loop (a T.alloc_var nothing in the
    # loop writes): it is loaded ahead by TMA like the rows of A, not copied synchronously each k-tile
    src = k.get_kernel_source()
    assert re.search(r"tma_load_tile\(\(&B_shared\[", src) and "cp_async" not in src, src
    # a tile whose rows are all its group's leaves with 16-byte stores from the padded shared tile
    assert re.search(r"vec_store<tc::half_t, tc::half_t, 8>\(\(&C\[", src), src
    no_spills(k)

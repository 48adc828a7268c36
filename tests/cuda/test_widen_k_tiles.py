"""widen_k_tiles (transform/widen_k_tiles.py): on sm_90a a TMA + wgmma main loop of 64-byte k-tiles
runs with 128-byte ones.  Checked here without a GPU: which loops qualify (and which do not), that the
widened program computes the same thing (the widened tile program itself runs on the CPU target
against torch: ragged K, transposed operands, bf16), that sm_80 and the switch leave code as it was,
and that the plan names the change.  The GPU run is tests/gpu/test_widen_k_tiles_gpu.py."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tilecraft as tilelang  # noqa: E402
import tilecraft.language as T  # noqa: E402
from tilecraft.compiler.build import effective_pass_configs  # noqa: E402
from tilecraft.kernels.gemm import matmul  # noqa: E402
from tilecraft.target import Target  # noqa: E402
from tilecraft.transform.pipeline import PassContext  # noqa: E402
from tilecraft.transform.widen_k_tiles import widen_k_tiles  # noqa: E402

SM90 = {"kind": "cuda", "arch": "sm_90a"}
SM80 = {"kind": "cuda", "arch": "sm_80"}
OFF = {"tc.widen_k_tiles": False}
UNSPLIT = {"tc.warp_specialize": False}   # split as two blocks per SM, the README loop keeps its k-tiles


def widened(func, configs=None):
    target = Target.resolve(SM90)
    return widen_k_tiles(func, PassContext(target, effective_pass_configs(configs, target)))


def loop_variant(M, N, K, variant):
    """The README loop in a program that keeps it from widening:
    "clear_accum": C holds only the last k-tile's product, which deeper tiles would change;
    "big tile": another 128 KB shared tile, so the 96 KB widened ring would not leave it room;
    "reader": the program also reads A's tile after the loop (the tile is not the loop's alone)."""
    extra = (64, 1024) if variant == "big tile" else (128, 32)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16"),
             D: T.Tensor(extra, "float16")):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), "float16")
            B_s = T.alloc_shared((32, 128), "float16")
            C_f = T.alloc_fragment((128, 128), "float32")
            T.clear(C_f)
            if variant == "big tile":
                big = T.alloc_shared(extra, "float16")
                T.copy(D, big)
            for ko in T.Pipelined(T.ceildiv(K, 32), num_stages=3):
                T.copy(A[by * 128, ko * 32], A_s)
                T.copy(B[ko * 32, bx * 128], B_s)
                T.gemm(A_s, B_s, C_f, clear_accum=variant == "clear_accum")
            T.copy(C_f, C[by * 128, bx * 128])
            if variant == "big tile":
                T.copy(big, D)
            if variant == "reader":
                T.copy(A_s, D)
    return main


def test_readme_gemm_is_widened_and_the_plan_says_so():
    k = tilelang.compile(matmul.get_tir(4096, 4096, 4096), out_idx=[-1], target=SM90, pass_configs=UNSPLIT)
    src, plan = k.get_kernel_source(), k.get_plan()
    assert "k-tiles of 32 widened to 64" in plan and "64 iterations instead of 128" in plan, plan
    assert "gemm_ss_sm90<128, 128, 64, 1," in src and "for (int ko = 0; ko < 64; ++ko)" in src, src
    assert "tma_expect((&tma_bar[0]), 32768)" in src  # 16 KB of A + 16 KB of B per stage


def test_widened_source_equals_the_64_deep_program():
    """The README GEMM widened is the same kernel as the program written with block_K=64."""
    wide = tilelang.compile(matmul.get_tir(2048, 2048, 2048), out_idx=[-1], target=SM90,
                            pass_configs=UNSPLIT).get_kernel_source()
    deep = tilelang.compile(matmul.get_tir(2048, 2048, 2048, 128, 128, 64, 3, 128), out_idx=[-1],
                            target=SM90, pass_configs=UNSPLIT).get_kernel_source()
    assert wide == deep


def test_a_loop_split_as_two_blocks_per_sm_keeps_its_k_tiles():
    """By default the README loop splits as two blocks per SM on a 4-stage ring of its own 32-half
    k-tiles (0.92-0.99x cuBLAS, where the widened 64/3 ring split ran 0.90x); the plan says so."""
    k = tilelang.compile(matmul.get_tir(4096, 4096, 4096), out_idx=[-1], target=SM90)
    src, plan = k.get_kernel_source(), k.get_plan()
    assert "widened" not in plan and "4 stages" in plan and "two blocks per SM" in plan, plan
    assert "ring deepened from the program's 3 stages" in plan and "unrolled 4x" in plan, plan
    assert "gemm_ss_sm90<128, 128, 32, 1," in src and "#pragma unroll 4\n" in src, src
    # what stops the split stops the widening from being skipped
    for configs in (UNSPLIT, {"tl.disable_warp_specialized": True}, {"tc.persistent_tiles": True}):
        plan = tilelang.compile(matmul.get_tir(4096, 4096, 4096), out_idx=[-1], target=SM90,
                                pass_configs=configs).get_plan()
        assert "widened to 64" in plan and "two blocks per SM" not in plan, (configs, plan)


def test_switch_off_and_sm80_keep_the_program():
    off = tilelang.compile(matmul.get_tir(4096, 4096, 4096), out_idx=[-1], target=SM90, pass_configs={**OFF, **UNSPLIT})
    assert "gemm_ss_sm90<128, 128, 32, 1," in off.get_kernel_source() and "widened" not in off.get_plan()
    a = tilelang.compile(matmul.get_tir(1024, 1024, 1024), out_idx=[-1], target=SM80).get_kernel_source()
    b = tilelang.compile(matmul.get_tir(1024, 1024, 1024), out_idx=[-1], target=SM80, pass_configs=OFF).get_kernel_source()
    assert a == b
    # without TMA (tl.disable_tma_lower) the cp.async loop keeps its tiles too
    notma = tilelang.compile(matmul.get_tir(1024, 1024, 1024), out_idx=[-1], target=SM90,
                             pass_configs={"tl.disable_tma_lower": True})
    assert "widened" not in notma.get_plan()


@pytest.mark.parametrize("case", ["odd trip count", "already 128-byte rows", "tile read after the loop",
                                  "fp32 operands", "clear_accum", "no shared memory to spare"])
def test_loops_that_do_not_qualify(case):
    if case == "odd trip count":
        func = matmul.get_tir(512, 512, 992)           # ceildiv(992, 32) = 31 iterations
    elif case == "already 128-byte rows":
        func = matmul.get_tir(512, 512, 512, 128, 128, 64, 3, 128)
    elif case == "tile read after the loop":
        func = loop_variant(512, 512, 512, "reader")
    elif case == "no shared memory to spare":
        func = loop_variant(512, 512, 512, "big tile")
    elif case == "clear_accum":
        func = loop_variant(512, 512, 512, "clear_accum")
    else:
        func = matmul.get_tir(512, 512, 512, dtype="float32", accum_dtype="float32")
    out = widened(func, UNSPLIT)
    assert out is func or not out.lowering.plan_notes, out.lowering.plan_notes


def _run_cpu(func, *tensors):
    return tilelang.compile(func, out_idx=[-1], target="cpu")(*tensors)


@pytest.mark.parametrize("M,N,K,trans_a,trans_b,dtype", [
    (256, 256, 256, False, False, "float16"),
    (200, 136, 1000, False, False, "float16"),   # ragged: 32 k-tiles of 32 -> 16 of 64, the last one half out
    (128, 256, 512, True, False, "float16"),
    (256, 128, 320, False, True, "bfloat16"),
    (130, 250, 960, True, True, "float16"),
])
def test_widened_program_computes_the_same_on_the_cpu_target(M, N, K, trans_a, trans_b, dtype):
    func = matmul.get_tir(M, N, K, trans_A=trans_a, trans_B=trans_b, dtype=dtype)
    wide = widened(func, UNSPLIT)
    assert wide.lowering.plan_notes and "widened" in wide.lowering.plan_notes[0]
    tdt = getattr(torch, dtype)
    a = torch.randn((K, M) if trans_a else (M, K)).to(tdt)
    b = torch.randn((N, K) if trans_b else (K, N)).to(tdt)
    ref = (a.float().T if trans_a else a.float()) @ (b.float().T if trans_b else b.float())
    got = _run_cpu(wide.with_lowering(plan_notes=()), a, b).float()
    assert torch.allclose(got, ref, rtol=2e-2, atol=2e-2 * ref.abs().max().item()), (got - ref).abs().max()
    # and the same as the program as written, on the same target
    assert torch.equal(_run_cpu(func, a, b), _run_cpu(wide.with_lowering(plan_notes=()), a, b))

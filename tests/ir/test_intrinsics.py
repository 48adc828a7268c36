"""Typed intrinsics (tilecraft/ir/intrinsics): header contracts checked in Python, the emitter
registry, their CUDA/CPU spellings; and the typed lowering state (ir/lowering.py) the passes fill
and the IR printer shows."""
from __future__ import annotations

import re

import pytest

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft import cli
from tilecraft.codegen.cpp import CppPrinter
from tilecraft.codegen.cuda import CudaPrinter
from tilecraft.errors import TilecraftError
from tilecraft.ir import Buffer, Gemm, Kernel, Load, Ref, Var, collect, const, dtype as dt
from tilecraft.ir import intrinsics as I
from tilecraft.ir.func import PrimFunc
from tilecraft.ir.lowering import SWIZZLE_SM80, SWIZZLE_SM90, Mma80Plan, WgmmaPlan, WgmmaRSPlan
from tilecraft.kernels import attention, gemm
from tilecraft.target import Target
from tilecraft.transform.cuda_pipeline import CUDA_PIPELINE

SM90 = Target.resolve({"kind": "cuda", "arch": "sm_90a"})
F16 = dt.float16


# ---- header contracts ---------------------------------------------------------------------------

@pytest.mark.parametrize("make, words", [
    (lambda: I.CpAsyncZfill(2), "4, 8 or 16 bytes"),
    (lambda: I.CpAsyncPipelinedZfill(32), "4, 8 or 16 bytes"),
    (lambda: I.CpAsyncWait(-1), "non-negative"),
    (lambda: I.VecStore(F16, F16, 16), "at most 16 bytes"),
    (lambda: I.VecLoadZfill(dt.float32, dt.float32, 8), "at most 16 bytes"),
    (lambda: I.GemmSS(48, 64, 32, 2, 2, False, False, 1, 1, F16), "multiple of 16*WM"),
    (lambda: I.GemmSS(64, 64, 24, 2, 2, False, False, 1, 1, F16), "multiple of 16"),
    (lambda: I.GemmSS(64, 64, 32, 2, 2, False, False, 2, 1, F16), "SWZ_A and SWZ_B"),
    (lambda: I.GemmSS(64, 64, 32, 2, 2, False, False, 1, 1, dt.float32), "float16 or bfloat16"),
    (lambda: I.GemmRS(64, 64, 32, 2, 2, False, 1, F16), "WN == 1"),
    (lambda: I.GemmSSSm90(64, 12, 32, 1, False, False, F16), "N must be a multiple of 8"),
    (lambda: I.GemmSSSm90(128, 64, 32, 3, False, False, F16), "64*WG"),
    (lambda: I.GemmSSSm90(64, 64, 8, 1, False, False, F16), "K must be a multiple of 16"),
    (lambda: I.GemmSSSm90(64, 64, 48, 1, False, False, F16), "A's stored row"),
    (lambda: I.GemmSSSm90(64, 24, 32, 1, False, False, F16), "B's stored row"),
    (lambda: I.GemmRSSm90(64, 40, 32, 1, False, F16), "B's stored row"),
    # 8-bit floats (wgmma k32 .e4m3/.e5m2): both operands K-major, K a multiple of 32; never from registers
    (lambda: I.GemmSSSm90(64, 64, 128, 1, False, False, dt.float8_e4m3fn), "must both be K-major"),
    (lambda: I.GemmSSSm90(64, 64, 128, 1, True, True, dt.float8_e5m2), "must both be K-major"),
    (lambda: I.GemmSSSm90(64, 64, 48, 1, False, True, dt.float8_e4m3fn), "multiple of 32 for 8-bit"),
    (lambda: I.GemmRSSm90(64, 64, 64, 1, True, dt.float8_e4m3fn), "float16 or bfloat16"),
    (lambda: I.GemmSS(64, 64, 64, 2, 2, False, False, 1, 1, dt.float8_e4m3fn), "must both be K-major"),
    (lambda: I.GemmSS(64, 64, 48, 2, 2, False, True, 1, 1, dt.float8_e4m3fn), "multiple of 32 for 8-bit"),
    (lambda: I.GemmRS(64, 64, 64, 4, 1, True, 1, dt.float8_e4m3fn), "float16 or bfloat16"),
    # A_ROWS / B_ROWS: the tiles' row counts (gemm_sm90.h), at least the rows the gemm reads, and a
    # multiple of 8 where rows over 128 bytes are stored in column panels that tall
    (lambda: I.GemmSSSm90(128, 64, 32, 2, False, False, F16, 1, 64), "at least the 128 rows"),
    (lambda: I.GemmSSSm90(64, 64, 128, 1, False, False, F16, 1, 68), "A_ROWS must be a multiple of 8"),
    (lambda: I.GemmSSSm90(64, 128, 32, 1, False, False, F16, 1, 64, 36), "B_ROWS must be a multiple of 8"),
    (lambda: I.GemmRSSm90(64, 128, 32, 1, False, F16, 16), "at least the 32 rows"),
    (lambda: I.ShflXorReduce("sum", ()), "at least one lane mask"),
    (lambda: I.ShflXorReduce("sum", (1, 32)), "1..31"),
    (lambda: I.ShflXorReduce("prod", (1,)), "combiner"),
    (lambda: I.PipeWait(0), "stages"),
    (lambda: I.WgmmaDrain(0), "NACC"),
    (lambda: I.ConsumerSync(48), "whole warps"),
    (lambda: I.WarpgroupRegAlloc(260), "[24, 256]"),
    (lambda: I.WarpgroupRegDealloc(20), "[24, 256]"),
    (lambda: I.WarpgroupRegAlloc(100), "multiple of 8"),
])
def test_template_parameters_break_the_header_contract(make, words):
    with pytest.raises(I.IntrinsicError, match=re.escape(words)):
        make()


def test_valid_parameters_are_accepted():
    I.GemmSSSm90(128, 256, 64, 2, False, False, dt.bfloat16, 1)
    I.GemmSSSm90(64, 64, 64, 1, True, True, F16)  # A [K][M] rows of 64, B [N][K] rows of 64
    I.GemmSSSm90(128, 256, 64, 2, False, False, F16, 1, 128, 64)  # B [64][256]: 4 panels of 64 rows
    I.GemmSSSm90(64, 64, 32, 1, False, False, F16, 0, 70, 36)  # rows of 64 bytes: no panels, any height
    I.GemmSSSm90(128, 128, 128, 1, False, True, dt.float8_e4m3fn)  # fp8: A [M][K], B [N][K], rows of 128 bytes
    I.GemmSSSm90(64, 256, 256, 1, False, True, dt.float8_e5m2, 0, 64, 256)  # rows of 256 bytes: 2 panels
    I.GemmRSSm90(64, 256, 32, 1, False, F16, 32)
    I.GemmRS(64, 64, 32, 4, 1, True, 0, F16)
    I.ShflXorReduce("max", (1, 2, 4, 8, 16))
    I.CpAsyncZfill(4)


# ---- the emitter registry -----------------------------------------------------------------------

def _ours():
    return [c for c in I.all_intrinsics() if c.__module__.startswith("tilecraft.ir.intrinsics")]


def test_the_registry_refuses_a_second_emitter():
    from tilecraft.registry import RegistryError
    with pytest.raises(RegistryError, match="already registered"):
        I.register_emitter(I.CpAsyncCommit, "cuda")(lambda p, c: "")


def test_every_intrinsic_has_a_cuda_emitter_and_names_a_header_entry():
    assert len(_ours()) >= 30
    for cls in _ours():
        assert (cls, "cuda") in I.EMITTERS, cls.__name__
        if cls is I.Extern:  # the program's own function (T.call_extern), not the header's
            continue
        assert cls.entry.startswith("tc::") and cls.family, cls.__name__


def _cuda(call) -> str:
    func = PrimFunc("f", (), Kernel((const(1),), (Var("bx"),), (128, 1, 1), I.evaluate(I.CpAsyncCommit())))
    return CudaPrinter(func, SM90).expr(call)


def test_cuda_spellings():
    S = Buffer("S", (64, 32), F16, "shared")
    C = Buffer("C", (32,), dt.float32, "local")
    refs = (Ref(S, (const(0), const(0))), Ref(S, (const(0), const(0))), Ref(C, (const(0),)))
    # PENDING, A_ROWS, B_ROWS always spelled (rows default to the gemm's extents, as in the header)
    assert _cuda(I.call(I.GemmSSSm90(64, 32, 32, 1, False, True, F16), *refs)) == \
        "tc::gemm_ss_sm90<64, 32, 32, 1, false, true, tc::half_t, 0, 64, 32>((&S[0]), (&S[0]), (&C[0]))"
    assert _cuda(I.call(I.GemmSSSm90(64, 32, 32, 1, False, True, dt.bfloat16, 1, 128, 64), *refs)).startswith(
        "tc::gemm_ss_sm90<64, 32, 32, 1, false, true, tc::bfloat16_t, 1, 128, 64>(")
    assert _cuda(I.call(I.GemmRSSm90(64, 32, 32, 1, False, F16, 64), *refs)).startswith(
        "tc::gemm_rs_sm90<64, 32, 32, 1, false, tc::half_t, 64>(")
    assert _cuda(I.call(I.ShflXorReduce("max", (1, 2)), const(1.0, dt.float32), dtype=dt.float32)) == \
        "tc::shfl_xor_reduce<tc::MaxOp, 1, 2>(1.0f)"
    assert _cuda(I.call(I.PipelineBarrier(1))) == "tc::PipelineBarrier<1>()"
    # the warp-specialization entry points (device/include/tilecraft/tma.h)
    assert _cuda(I.call(I.ConsumerSync(256))) == "tc::consumer_sync<256>()"
    assert _cuda(I.call(I.WarpgroupRegAlloc(232))) == "tc::warpgroup_reg_alloc<232>()"
    assert _cuda(I.call(I.WarpgroupRegDealloc(24))) == "tc::warpgroup_reg_dealloc<24>()"
    bar = Buffer("tma_empty", (3,), dt.uint64, "shared")
    assert _cuda(I.call(I.MbarArriveWarp(), Ref(bar, (const(1),)))) == "tc::mbar_arrive_warp((&tma_empty[1]))"
    assert _cuda(I.call(I.CpAsyncZfill(16), *refs[:2], const(True, dt.bool_))) == \
        "tc::cp_async_zfill<16>((&S[0]), (&S[0]), true)"
    # a tile element: the header's print(msg, buffer, index, value), row-major index
    elem = I.call(I.PrintElem((64, 32)), "S", Load(S, (const(3), const(5))), const(3), const(5))
    assert _cuda(elem) == 'tc::print("S", "S", (long long)((3) * 32 + (5)), S[3 * 32 + 5])'


def test_the_cpu_printer_refuses_device_only_intrinsics():
    func = PrimFunc("f", (), Kernel((const(1),), (Var("bx"),), (1, 1, 1), I.evaluate(I.CpAsyncCommit())))
    with pytest.raises(TilecraftError, match="not available on the CPU target"):
        CppPrinter(func).expr(I.call(I.CpAsyncCommit()))
    for cls in (I.AtomicAdd, I.AtomicMax, I.AtomicMin, I.Print, I.PrintElem):
        assert (cls, "cpu") in I.EMITTERS


@tilelang.jit(out_idx=[-1])
def print_tiles(N=8):
    @T.prim_func
    def main(A: T.Tensor((N, N), "float32"), B: T.Tensor((N, N), "float32")):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((N, N), "float32")
            F = T.alloc_fragment((N, N), "float32")
            T.copy(A, S)
            T.copy(S, F)
            T.print(S, msg="S")
            T.print(F, msg="F")
            T.copy(F, B)
    return main


def test_printing_tiles_compiles_for_cuda():
    """T.print of a shared tile and of a fragment used to call a tc::print_elem the header never had."""
    k = tilelang.compile(print_tiles.fn(), out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    src = k.get_kernel_source()
    assert 'tc::print("S", "S", (long long)(' in src and 'tc::print("F", "F", (long long)(' in src


# ---- the lowering state --------------------------------------------------------------------------

def _lower_until(func, last: str, configs=None):
    from tilecraft.options import as_options
    from tilecraft.transform.pipeline import PassContext
    ctx = PassContext(SM90, as_options(configs))
    for p in CUDA_PIPELINE:
        func = p(func, ctx)
        if p.__name__ == last:
            return func
    raise AssertionError(last)


def test_gemm_plans_are_typed_and_live_on_the_gemm_through_pipelining():
    f = gemm.matmul.fn(512, 512, 512, block_K=32, num_stages=3)
    after = _lower_until(f, "infer_layouts")
    assert [g.plan for g in collect(after.body, lambda n: isinstance(n, Gemm))] == [Mma80Plan(2, 2)]
    piped = _lower_until(f, "pipeline_copies")
    (g,) = collect(piped.body, lambda n: isinstance(n, Gemm))
    assert g.plan == Mma80Plan(2, 2) and g.pipeline_hook is not None and g.a.buffer.shape == (3, 128, 32)
    st = piped.lowering
    assert {b.shape: k for b, k in st.smem_layouts.items()} == {(3, 128, 32): SWIZZLE_SM80, (3, 32, 128): SWIZZLE_SM80}
    assert any("T.Pipelined, 3 stages" in n for n in st.plan_notes)


def test_wgmma_plans_and_hopper_layouts():
    f = attention.flash_attention.fn(1, 2, 512, 64, block_M=64, block_N=64, num_stages=2, threads=128)
    after = _lower_until(f, "plan_shared_layouts", {"tc.use_wgmma": True})
    plans = [g.plan for g in collect(after.body, lambda n: isinstance(n, Gemm))]
    assert plans == [WgmmaPlan(1), WgmmaRSPlan(1)]
    assert set(after.lowering.smem_layouts.values()) == {SWIZZLE_SM90}
    assert after.lowering.hopper


def test_the_lowered_ir_explains_every_decision():
    k = tilelang.compile(gemm.matmul.fn(256, 256, 256, block_K=64), out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"},
                         pass_configs={"tc.use_wgmma": True, "tc.wgmma_async": True, "tc.use_tma": True})
    low = k.get_lowered_ir()
    state = low[low.index("# lowering state"):]
    for words in ("layout C_local (128, 128)", "shared A_shared (3, 128, 64): swizzle sm90",
                  "smem A_shared: bytes [0, ", "smem total: ", "tma desc 0: A box", "tma desc 1: B box",
                  "plan: gemm.py:", "on wgmma, 1 warpgroup(s)", "TMA tile loads on per-stage mbarriers"):
        assert words in state, words
    assert "tc.tma_load_tile(" in low and "tc.gemm_ss_sm90<m=128, n=128, k=64, wg=1" in low
    assert [d["param"] for d in k.artifact.meta["tma"]] == [0, 1]  # A and B, by parameter position


def test_show_lowered_prints_the_lowering_state(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    rc = cli.main(["show", "tilecraft/kernels/gemm.py:matmul", "256", "256", "256", "--what", "lowered",
                   "--target", "sm_80"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "# lowering state (ir/lowering.py):" in out and "swizzle sm80" in out and "mma.sync, 2x2 warps" in out


def test_effects_name_the_barrier_a_call_arrives_on_or_waits_on():
    bar = Buffer("bar", (4,), dt.uint64, "shared")
    S = Buffer("S", (64, 64), F16, "shared")
    full = Ref(bar, (const(1),))
    load = I.call(I.TmaLoadTile(), Ref(S, (const(0), const(0))), const(0), Var("desc"), full, const(0), const(0))
    assert load.barrier() is full and load.intrinsic.effects.arrives and load.intrinsic.effects.proxy == I.TMA
    wait = I.call(I.MbarWaitParity(), full, const(0))
    assert wait.barrier() is full and wait.intrinsic.effects.waits == I.MBARRIER_PHASE
    assert I.call(I.CpAsyncCommit()).barrier() is None
    assert I.GemmSSSm90.effects.commits == I.WGMMA and I.GemmSSSm90.effects.waits == I.WGMMA_GROUPS
    assert I.CpAsyncPipelinedZfill.effects.pipeline_ordered and not I.CpAsyncZfill.effects.pipeline_ordered

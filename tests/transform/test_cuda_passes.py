"""Every CUDA pass alone, IR in / IR (or lowering state) out: a small program runs through the
passes before it in `CUDA_PIPELINE` (its prerequisites), then through the pass itself with the same
`PassContext`, and the test checks what the pass's docstring promises on the function before and
after.  No code is generated or compiled; the generated code of these passes is checked in
tests/cuda and tests/cpu.  (plan_pipelines: test_plan_pipelines.py; shift_parallel_anchors,
insert_syncs, hoist_invariants: their own files.)"""
from __future__ import annotations

import pytest

import tilecraft.language as T
from tilecraft.compiler.build import effective_pass_configs
from tilecraft.errors import TilecraftError
from tilecraft.ir import Alloc, Annotate, AnnotationKey, Copy, For, Gemm, TileOp, collect
from tilecraft.ir.hopper import BarrierArrive, BarrierInit, BarrierWait, WarpGroupScope
from tilecraft.ir.intrinsics import WgmmaWait
from tilecraft.ir.intrinsics.base import IntrinsicCall
from tilecraft.ir.lowering import SWIZZLE_SM80, SWIZZLE_SM90, Mma80Plan, WgmmaPlan
from tilecraft.kernels.gemm import matmul
from tilecraft.target import Target
from tilecraft.transform.cuda_pipeline import CUDA_PIPELINE
from tilecraft.transform.infer_layouts import infer_layouts
from tilecraft.transform.inline_copy_lets import inline_copy_lets
from tilecraft.transform.lower_cuda import lower_cuda
from tilecraft.transform.lower_manual_sync_cuda import lower_manual_sync_cuda
from tilecraft.transform.overlap_independent_gemms import overlap_independent_gemms
from tilecraft.transform.pipeline import PassContext
from tilecraft.transform.pipeline_copies import pipeline_copies
from tilecraft.transform.plan_shared_layouts import plan_shared_layouts
from tilecraft.transform.plan_shared_memory import plan_shared_memory
from tilecraft.transform.stage_epilogue import stage_epilogue
from tilecraft.transform.stage_gemm_operands import stage_gemm_operands
from tilecraft.transform.stage_reduce_destinations import stage_reduce_destinations
from tilecraft.transform.validate import validate
from tilecraft.transform.widen_k_tiles import widen_k_tiles

SM80 = Target.resolve({"kind": "cuda", "arch": "sm_80"})
SM90 = Target.resolve({"kind": "cuda", "arch": "sm_90a"})


def around(func, target, the_pass, configs=None):
    """(the function as `the_pass` receives it, what it returns): the passes before it in the CUDA
    list, then it, all with one context (the target's defaults under `configs`, as `build` does)."""
    ctx = PassContext(target, effective_pass_configs(configs, target))
    for p in CUDA_PIPELINE[:CUDA_PIPELINE.index(the_pass)]:
        func = p(func, ctx)
    return func, the_pass(func, ctx)


def nodes(func, cls):
    return collect(func.body, lambda n: isinstance(n, cls))


def buffer_named(func, name):
    (a,) = [a for a in nodes(func, Alloc) if a.buffer.name == name]
    return a.buffer


def gemm_tir(**kw):
    return matmul.get_tir(512, 512, 512, **kw)


# ---- validate ---------------------------------------------------------------------------------

def test_validate_returns_a_valid_program_unchanged_and_refuses_a_bad_one_at_its_line():
    func = gemm_tir()
    before, after = around(func, SM80, validate)
    assert after is before is func

    @T.prim_func
    def shifts_a_float(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                B[i] = A[i] << 1   # noqa: the line the error names
    with pytest.raises(TilecraftError) as e:
        around(shifts_a_float, SM80, validate)
    assert "test_cuda_passes.py" in str(e.value) and "<<" in str(e.value)


# ---- lower_manual_sync_cuda -------------------------------------------------------------------

def producer_consumer():
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=256) as _:
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_f = T.alloc_fragment((128, 128), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                T.copy(A, A_s)
                T.copy(B, B_s)
                T.barrier_arrive(ready)
            with T.ws(0):
                T.clear(C_f)
                T.barrier_wait(ready, 0)
                T.gemm(A_s, B_s, C_f)
                T.copy(C_f, C)
    return main


def test_lower_manual_sync_cuda_turns_barriers_into_intrinsics_and_marks_the_kernel_manual():
    before, after = around(producer_consumer(), SM90, lower_manual_sync_cuda)
    for cls in (BarrierInit, BarrierArrive, BarrierWait):
        assert nodes(before, cls) and not nodes(after, cls)
    assert len(nodes(after, WarpGroupScope)) == len(nodes(before, WarpGroupScope)) == 2   # the branches stay
    names = {c.intrinsic.describe() for c in nodes(after, IntrinsicCall)}
    assert any("mbar" in n for n in names), names
    assert [a.key for a in nodes(after, Annotate)].count(AnnotationKey.MANUAL_WARP_GROUPS) == 1
    assert not [a for a in nodes(before, Annotate) if a.key == AnnotationKey.MANUAL_WARP_GROUPS]


def test_lower_manual_sync_cuda_leaves_a_program_without_manual_constructs_alone():
    before, after = around(gemm_tir(), SM80, lower_manual_sync_cuda)
    assert after.script() == before.script()
    assert not [a for a in nodes(after, Annotate) if a.key == AnnotationKey.MANUAL_WARP_GROUPS]


# ---- widen_k_tiles ----------------------------------------------------------------------------

def k_tile(func, name="A_shared"):
    return tuple(buffer_named(func, name).shape)


def pipelined(func):
    (loop,) = [f for f in nodes(func, For) if f.kind == "pipelined"]
    return loop


def test_widen_k_tiles_deepens_short_k_tiles_of_a_tma_wgmma_loop():
    func = matmul.get_tir(1024, 1024, 1024, 128, 128, 32, num_stages=3, threads=256)   # 64-byte rows
    before, after = around(func, SM90, widen_k_tiles)
    assert (k_tile(before), k_tile(before, "B_shared")) == ((128, 32), (32, 128))
    assert (k_tile(after), k_tile(after, "B_shared")) == ((128, 64), (64, 128))   # 128-byte rows
    assert (pipelined(before).extent.value, pipelined(after).extent.value) == (32, 16)
    copy_a = [c for c in nodes(pipelined(after), Copy) if c.src.buffer.name == "A"]
    assert [tuple(e.value if hasattr(e, "value") else e for e in c.src.extents) for c in copy_a] == [(128, 64)]


@pytest.mark.parametrize("target,configs,shape", [
    (SM90, {"tc.widen_k_tiles": False}, (128, 128, 32, 256)),   # turned off
    (SM80, None, (128, 128, 32, 256)),                           # no TMA + wgmma loop
    (SM90, None, (128, 256, 32, 256)),                           # the deeper ring would pass 128 KB
    (SM90, None, (128, 128, 32, 128)),                           # splits as two blocks per SM: keeps its k-tiles
    (SM90, None, (128, 256, 64, 256)),                           # already 128-byte rows
])
def test_widen_k_tiles_leaves_other_loops_as_written(target, configs, shape):
    bm, bn, bk, threads = shape
    func = matmul.get_tir(1024, 1024, 1024, bm, bn, bk, num_stages=3, threads=threads)
    before, after = around(func, target, widen_k_tiles, configs)
    assert k_tile(after) == k_tile(before) == (bm, bk)
    assert pipelined(after).extent.value == pipelined(before).extent.value


# ---- stage_reduce_destinations ----------------------------------------------------------------

def reductions_into_shared():
    @T.prim_func
    def main(X: T.Tensor((4, 16), "float32"), Y: T.Tensor((4,), "float32"), Z: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=128) as _:
            R = T.alloc_fragment((4, 16), "float32")
            S = T.alloc_shared((4,), "float32")
            F = T.alloc_fragment((4,), "float32")
            T.copy(X, R)
            T.fill(S, 1.0)
            T.reduce_sum(R, S, dim=1, clear=False)   # into shared, folded into its values
            T.reduce_max(R, F, dim=1)                # into a fragment: left as it is
            T.copy(S, Y)
            T.copy(F, Z)
    return main


def test_stage_reduce_destinations_reduces_into_a_fragment_then_copies_to_the_shared_tile():
    from tilecraft.ir import Reduce
    before, after = around(reductions_into_shared(), SM80, stage_reduce_destinations)
    assert sorted(r.dst.scope for r in nodes(before, Reduce)) == ["fragment", "shared"]
    assert [r.dst.scope for r in nodes(after, Reduce)] == ["fragment", "fragment"]
    (staged,) = [r for r in nodes(after, Reduce) if r.dst.name != "F"]
    tmp, shared = staged.dst, buffer_named(after, "S")
    assert tuple(tmp.shape) == tuple(shared.shape) and tmp.dtype == shared.dtype and not staged.clear
    around_it = [(c.src.buffer.name, c.dst.buffer.name) for c in nodes(after, Copy)
                 if tmp in (c.src.buffer, c.dst.buffer)]
    assert around_it == [("S", tmp.name), (tmp.name, "S")]   # its old values in (clear=False), the result out


# ---- infer_layouts ----------------------------------------------------------------------------

@pytest.mark.parametrize("target,plan", [(SM80, Mma80Plan), (SM90, WgmmaPlan)])
def test_infer_layouts_plans_the_gemm_and_lays_out_every_fragment(target, plan):
    before, after = around(gemm_tir(), target, infer_layouts)
    (g_before,), (g_after,) = nodes(before, Gemm), nodes(after, Gemm)
    assert g_before.plan is None and isinstance(g_after.plan, plan)
    assert not before.lowering.fragment_layouts
    fragments = {a.buffer for a in nodes(after, Alloc) if a.buffer.scope == "fragment"}
    assert fragments and set(after.lowering.fragment_layouts) == fragments
    assert after.lowering.fragment_layouts[g_after.c.buffer].num_regs == 128 * 128 // 128


# ---- stage_gemm_operands ----------------------------------------------------------------------

def fragment_b():
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            A_s = T.alloc_shared((64, 32), "float16")
            B_f = T.alloc_fragment((32, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_f)
            T.clear(C_f)
            T.gemm(A_s, B_f, C_f)
            T.copy(C_f, C)
    return main


def test_stage_gemm_operands_sends_a_fragment_b_through_a_shared_tile():
    before, after = around(fragment_b(), SM80, stage_gemm_operands)
    (g_before,), (g_after,) = nodes(before, Gemm), nodes(after, Gemm)
    assert g_before.b.buffer.scope == "fragment"
    staged = g_after.b.buffer
    assert staged.scope == "shared" and tuple(staged.shape) == (32, 64) and staged.dtype == g_before.b.buffer.dtype
    assert g_after.a.buffer is g_before.a.buffer and g_after.plan == g_before.plan
    fills = [c for c in nodes(after, Copy) if c.dst.buffer is staged]
    assert len(fills) == 1 and fills[0].src.buffer is g_before.b.buffer
    assert any(a.buffer is staged for a in nodes(after, Alloc))


def test_stage_gemm_operands_leaves_shared_operands_alone():
    before, after = around(gemm_tir(), SM80, stage_gemm_operands)
    assert after.body is before.body


def copied_operand(write_between: bool = False):
    """TileLang's attention idiom: S_s copied whole into the fragment the gemm reads (warps along N, so
    the fragment cannot be A in registers: 8 warps over 64 rows)."""
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256) as _:
            S_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            S_f = T.alloc_fragment((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A, S_s)
            T.copy(B, B_s)
            T.copy(S_s, S_f)
            if write_between:
                T.fill(S_s, 0)
            T.clear(acc)
            T.gemm(S_f, B_s, acc, policy=T.GemmWarpPolicy.FullCol)
            T.copy(acc, C)
    return main


@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90a"])
def test_stage_gemm_operands_reads_the_shared_tile_a_fragment_operand_was_copied_from(target):
    before, after = around(copied_operand(), target, stage_gemm_operands)
    (g_before,), (g_after,) = nodes(before, Gemm), nodes(after, Gemm)
    assert g_before.a.buffer.name == "S_f"
    assert g_after.a.buffer is buffer_named(before, "S_s") and g_after.a.covers_whole()
    assert g_after.plan == g_before.plan
    assert not [a for a in nodes(after, Alloc) if a.buffer.name.endswith("_smem")]   # no staging tile
    assert [c for c in nodes(after, Copy) if c.dst.buffer.name == "S_f"]             # the fragment still filled


def test_stage_gemm_operands_stages_a_fragment_whose_shared_source_changed_after_the_copy():
    _, after = around(copied_operand(write_between=True), SM80, stage_gemm_operands)
    (g,) = nodes(after, Gemm)
    assert g.a.buffer.name == "S_f_smem" and g.a.buffer.scope == "shared"


# ---- stage_epilogue ---------------------------------------------------------------------------

def test_stage_epilogue_stores_the_accumulator_through_a_padded_shared_tile():
    before, after = around(gemm_tir(), SM80, stage_epilogue)
    (store,) = [c for c in nodes(before, Copy) if c.dst.buffer.scope == "global"]
    assert store.src.buffer.scope == "fragment"
    (out,) = [c for c in nodes(after, Copy) if c.dst.buffer.scope == "global"]
    stage = out.src.buffer
    assert stage.scope == "shared" and tuple(stage.shape) == (128, 128 + 8)
    (into,) = [c for c in nodes(after, Copy) if c.dst.buffer is stage]
    assert into.src.buffer is store.src.buffer
    off = around(gemm_tir(), SM80, stage_epilogue, {"tc.stage_epilogue": False})
    assert off[1].body is off[0].body


# ---- plan_shared_layouts ----------------------------------------------------------------------

@pytest.mark.parametrize("target,swizzle", [(SM80, SWIZZLE_SM80), (SM90, SWIZZLE_SM90)])
def test_plan_shared_layouts_swizzles_the_tiles_the_gemm_reads(target, swizzle):
    before, after = around(gemm_tir(), target, plan_shared_layouts)
    assert not before.lowering.smem_layouts
    tiles = {buffer_named(after, "A_shared"), buffer_named(after, "B_shared")}
    assert {b: after.lowering.smem_layouts.get(b) for b in tiles} == dict.fromkeys(tiles, swizzle)


def test_plan_shared_layouts_leaves_rows_that_are_not_a_power_of_two_chunks_plain():
    # B's rows: 96 halves, twelve 16-byte chunks -- no swizzle fits; A's: 32 halves, four chunks
    before, after = around(matmul.get_tir(256, 192, 256, 64, 96, 32, num_stages=0), SM80, plan_shared_layouts)
    assert isinstance(nodes(after, Gemm)[0].plan, Mma80Plan)
    assert buffer_named(after, "B_shared") not in after.lowering.smem_layouts
    assert after.lowering.smem_layouts.get(buffer_named(after, "A_shared")) == SWIZZLE_SM80


# ---- pipeline_copies --------------------------------------------------------------------------

def test_pipeline_copies_multi_buffers_the_tiles_and_consumes_every_plan():
    before, after = around(gemm_tir(num_stages=3), SM80, pipeline_copies)
    assert pipelined(before).plan is not None
    assert not [f for f in nodes(after, For) if f.plan is not None]
    assert (k_tile(before), k_tile(after)) == ((128, 32), (3, 128, 32))     # S buffers, a leading stage dim
    assert tuple(buffer_named(after, "B_shared").shape) == (3, 32, 128)
    assert after.lowering.smem_layouts.get(buffer_named(after, "A_shared")) == SWIZZLE_SM80   # keeps its swizzle


def test_pipeline_copies_builds_the_tma_descriptors_of_a_tma_loop():
    func = matmul.get_tir(8192, 8192, 8192, 128, 256, 64, num_stages=3, threads=256)
    before, after = around(func, SM90, pipeline_copies)
    assert not before.lowering.tma_descs
    assert {d.tensor for d in after.lowering.tma_descs} >= {"A", "B"}


def test_pipeline_copies_leaves_an_unplanned_loop_alone():
    before, after = around(gemm_tir(num_stages=0), SM80, pipeline_copies)
    assert after.body is before.body


# ---- lower_cuda -------------------------------------------------------------------------------

def test_lower_cuda_leaves_thread_level_code_only():
    before, after = around(gemm_tir(), SM80, lower_cuda)
    assert nodes(before, TileOp) and not nodes(after, TileOp)
    assert not [f for f in nodes(after, For) if f.kind == "parallel"]
    assert not [a for a in nodes(after, Alloc) if a.buffer.scope == "fragment"]
    c_local = [a.buffer for a in nodes(after, Alloc) if a.buffer.name == "C_local"]
    assert c_local and c_local[0].scope == "local" and c_local[0].numel == 128   # this thread's registers
    gemm_calls = [c for c in nodes(after, IntrinsicCall) if "gemm" in c.intrinsic.describe()]
    assert gemm_calls


# ---- plan_shared_memory -----------------------------------------------------------------------

def test_plan_shared_memory_places_every_shared_buffer_aligned_within_the_total():
    before, after = around(gemm_tir(), SM80, plan_shared_memory)
    assert not before.lowering.smem_offsets
    shared = {a.buffer for a in nodes(after, Alloc) if a.buffer.scope == "shared"}
    offsets = after.lowering.smem_offsets
    assert shared and shared <= set(offsets)
    assert all(offsets[b] % 128 == 0 for b in shared)
    assert after.lowering.smem_bytes >= max(offsets[b] + b.nbytes for b in shared)
    a, b = buffer_named(after, "A_shared"), buffer_named(after, "B_shared")   # both live in the loop
    assert offsets[a] + a.nbytes <= offsets[b] or offsets[b] + b.nbytes <= offsets[a]


def two_reductions_in_a_branch():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), M: T.Tensor((2, 64), "float32"),
             n: T.int32):
        with T.Kernel(1, threads=256) as _:
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            mx = T.alloc_fragment((64,), "float32")
            sm = T.alloc_fragment((64,), "float32")
            for k in T.serial(2):
                if n > k:
                    T.copy(A, A_s)
                    T.copy(B, B_s)
                    T.clear(acc)
                    T.gemm(A_s, B_s, acc, policy=T.GemmWarpPolicy.FullCol)
                    T.reduce_max(acc, mx, dim=1)
                    T.reduce_sum(acc, sm, dim=1)
                    T.copy(mx, M[0, :])
                    T.copy(sm, M[1, :])
    return main


def reductions_in_two_warp_group_branches():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), M: T.Tensor((2, 64), "float32"), n: T.int32):
        with T.Kernel(1, threads=256) as _:
            A_s = T.alloc_shared((64, 64), "float32")
            x0 = T.alloc_fragment((64, 64), "float32")
            x1 = T.alloc_fragment((64, 64), "float32")
            r0 = T.alloc_fragment((64,), "float32")
            r1 = T.alloc_fragment((64,), "float32")
            T.copy(A, A_s)
            for k in T.serial(2):
                if n > k:
                    with T.ws(0):
                        T.copy(A_s, x0)
                        T.reduce_max(x0, r0, dim=0)
                        T.copy(r0, M[0, :])
                    with T.ws(1):
                        T.copy(A_s, x1)
                        T.reduce_sum(x1, r1, dim=0)
                        T.copy(r1, M[1, :])
    return main


def test_plan_shared_memory_keeps_apart_the_scratch_of_warp_group_branches_that_run_together():
    from tilecraft.ir import Kernel
    from tilecraft.transform.plan_shared_memory import plan_kernel
    before, _ = around(reductions_in_two_warp_group_branches(), SM90, plan_shared_memory)
    scratch = before.lowering.scratch_smem
    assert len(scratch) >= 2
    (k,) = nodes(before, Kernel)
    _, tight, _ = plan_kernel(k, before.lowering.smem_layouts, scratch, limit=1)
    spans = sorted((o, o + b.nbytes) for b, o in tight.items() if b in scratch)
    assert all(e <= o for (_, e), (o, _) in zip(spans, spans[1:])), spans


def test_plan_shared_memory_over_the_limit_lets_reduction_scratch_in_an_if_body_share_bytes():
    from tilecraft.ir import Kernel
    from tilecraft.transform.plan_shared_memory import plan_kernel
    before, after = around(two_reductions_in_a_branch(), SM90, plan_shared_memory)
    scratch = before.lowering.scratch_smem
    assert len(scratch) >= 2                      # one cross-warp scratch per reduction
    (k,) = nodes(before, Kernel)
    _, plain, _ = plan_kernel(k, before.lowering.smem_layouts, scratch, limit=1 << 30)
    _, tight, _ = plan_kernel(k, before.lowering.smem_layouts, scratch, limit=1)   # every fallback
    offsets = {b.name: o for b, o in tight.items() if b in scratch}
    assert len(set(offsets.values())) == 1, offsets       # the two reductions, one after the other, share
    assert len({o for b, o in plain.items() if b in scratch}) == len(scratch)   # within the limit: apart


# ---- inline_copy_lets ---------------------------------------------------------------------------

def named_position_tir(stages: int, read_offsets: bool = False):
    @T.prim_func
    def main(X: T.Tensor((16, 512), "float32"), Offsets: T.Tensor((8,), "int32"), Out: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            X_s = T.alloc_shared((16, 64), "float32")
            acc = T.alloc_fragment((16, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(8, num_stages=stages):
                pos = Offsets[k] if read_offsets else k * 64
                end = pos + 64
                T.copy(X[0:16, pos:end], X_s)
                for i, j in T.Parallel(16, 64):
                    acc[i, j] += X_s[i, j]
            T.copy(acc, Out)
    return main


def test_inline_copy_lets_puts_a_pure_named_position_into_the_copy():
    from tilecraft.ir import Let, Var
    before, after = around(named_position_tir(2), SM80, inline_copy_lets)
    lets = {n.var for n in nodes(after, Let)}
    (c_before,), (c_after,) = ([c for c in nodes(f, Copy) if c.src.buffer.name == "X"] for f in (before, after))
    assert {v for v in collect(c_before.src, lambda n: isinstance(n, Var))} & lets     # pos, end
    assert not {v for v in collect(c_after.src, lambda n: isinstance(n, Var))} & lets  # k only
    assert len(nodes(after, Let)) == len(nodes(before, Let))                            # the Lets stay


@pytest.mark.parametrize("stages,read_offsets", [(1, False), (2, True)])
def test_inline_copy_lets_leaves_unpipelined_loops_and_positions_read_from_memory(stages, read_offsets):
    before, after = around(named_position_tir(stages, read_offsets), SM80, inline_copy_lets)
    assert after is before


# ---- coverage -----------------------------------------------------------------------------------

def test_every_pass_of_every_pipeline_has_a_pass_level_test():
    """Each pass of the three lists is imported by name by a test file here (which runs it alone)."""
    import re
    from pathlib import Path
    from tilecraft.transform.cpu_threads import CPU_THREADS_PIPELINE
    from tilecraft.transform.pipeline import CPU_PIPELINE
    here = Path(__file__).parent
    texts = [p.read_text() for p in here.glob("test_*.py")]
    passes = {p.__name__ for p in (*CPU_PIPELINE, *CPU_THREADS_PIPELINE, *CUDA_PIPELINE)}
    untested = {name for name in passes
                if not any(re.search(rf"^from tilecraft\.transform\.[\w.]+ import .*\b{name}\b", t, re.M) for t in texts)}
    assert {"validate", "lower_cuda", "mark_cpu_threads"} <= passes and untested == set()


def copy_through(request: bool):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((64, 64), "float16")
            if request:
                T.annotate_layout({S: T.make_swizzled_layout(S)})
            T.copy(A, S)
            T.copy(S, B)
    return main


def test_plan_shared_layouts_honours_an_explicit_swizzle_request():
    for request in (True, False):   # no gemm reads S: only the request swizzles it
        _, after = around(copy_through(request), SM80, plan_shared_layouts)
        assert after.lowering.smem_layouts.get(buffer_named(after, "S")) == (SWIZZLE_SM80 if request else None)


# ---- overlap_independent_gemms ----------------------------------------------------------------

def two_gemms(dependent: bool = False, between_write_shared: bool = False, fold_between: bool = False):
    """P0 = A0 B0; P1 = A1 B1 (or P0 += A1 B1 when `dependent`); C = P0 + 2 P1, 128x128x64 fp16.
    `fold_between`: Q += P1 (P1's previous value) between the two gemms, as the block-scaled fp8 GEMM
    folds the previous stage's second partial."""
    @T.prim_func
    def main(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16"),
             C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=256) as _:
            A0 = T.alloc_shared((128, 64), "float16")
            B0 = T.alloc_shared((64, 128), "float16")
            A1 = T.alloc_shared((128, 64), "float16")
            B1 = T.alloc_shared((64, 128), "float16")
            S = T.alloc_shared((128, 128), "float32")
            P0 = T.alloc_fragment((128, 128), "float32")
            P1 = T.alloc_fragment((128, 128), "float32")
            Q = T.alloc_fragment((128, 128), "float32")
            T.copy(A[0, 0], A0)
            T.copy(B[0, 0], B0)
            T.copy(A[0, 64], A1)
            T.copy(B[64, 0], B1)
            if fold_between:
                T.fill(P1, 1.0)
                T.clear(Q)
            T.gemm(A0, B0, P0, clear_accum=True)
            if fold_between:
                for i, j in T.Parallel(128, 128):
                    Q[i, j] += P1[i, j]
            T.gemm(A1, B1, P0 if dependent else P1, clear_accum=not dependent)
            for i, j in T.Parallel(128, 128):
                P0[i, j] = P0[i, j] * 0.5
            if fold_between:
                for i, j in T.Parallel(128, 128):
                    P0[i, j] = P0[i, j] + Q[i, j]
            if between_write_shared:
                T.copy(P0, S)
            for i, j in T.Parallel(128, 128):
                P1[i, j] = P0[i, j] + 2.0 * P1[i, j]
            T.copy(P1, C)
    return main


def waits(node) -> list:
    calls = collect(node, lambda n: isinstance(n, IntrinsicCall) and isinstance(n.intrinsic, WgmmaWait))
    return [(c.intrinsic.pending, c.args[0].buffer.name) for c in calls]


def gemm_seq(func) -> list:
    """The statements of the list that holds the gemms."""
    (s,) = collect(func.body, lambda n: hasattr(n, "stmts") and any(isinstance(x, Gemm) for x in n.stmts))
    return list(s.stmts)


def test_independent_gemms_issue_together_and_wait_where_used():
    before, after = around(two_gemms(), SM90, overlap_independent_gemms)
    assert [g.async_groups for g in nodes(before, Gemm)] == [0, 0]
    assert [g.async_groups for g in nodes(after, Gemm)] == [1, 1]
    # P0 readable after one group is left; P1 before the statement that reads it (the second loop)
    assert waits(after.body) == [(1, "P0"), (0, "P1")]
    stmts = gemm_seq(after)
    kinds = [("gemm" if isinstance(s, Gemm) else "wait" if waits(s) else "for" if isinstance(s, For) else "")
             for s in stmts]
    g = kinds.index("gemm")
    assert kinds[g:g + 6] == ["gemm", "gemm", "wait", "for", "wait", "for"], kinds


def test_register_work_between_the_gemms_runs_under_the_first_and_no_statement_is_lost():
    before, after = around(two_gemms(fold_between=True), SM90, overlap_independent_gemms)
    assert [g.async_groups for g in nodes(after, Gemm)] == [1, 1]
    assert waits(after.body) == [(1, "P0"), (0, "P1")]
    old, new = gemm_seq(before), gemm_seq(after)
    # the same statements in the same order (the gemms marked asynchronous), the two waits added
    assert [type(s).__name__ for s in new if not waits(s)] == [type(s).__name__ for s in old]
    kinds = [("gemm" if isinstance(s, Gemm) else "wait" if waits(s) else "for" if isinstance(s, For) else "")
             for s in new]
    g = kinds.index("gemm")
    # gemm P0; Q += P1 (under the first gemm); gemm P1; P0 readable; P0 *= 0.5; P0 += Q; P1 readable
    assert kinds[g:g + 7] == ["gemm", "for", "gemm", "wait", "for", "for", "wait"], kinds


def rs_gemms():
    """FlashAttention backward's shape: S = A0 B0 (shared operands); O1 += cast(S) B1 and O2 += cast(2 S) B2 with
    A from registers, the second cast computed between them; then O1 += O2, 128x64x64 fp16."""
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=256) as _:
            A0 = T.alloc_shared((128, 64), "float16")
            B0 = T.alloc_shared((64, 64), "float16")
            B1 = T.alloc_shared((64, 128), "float16")
            S = T.alloc_fragment((128, 64), "float32")
            S1 = T.alloc_fragment((128, 64), "float16")
            S2 = T.alloc_fragment((128, 64), "float16")
            O1 = T.alloc_fragment((128, 128), "float32")
            O2 = T.alloc_fragment((128, 128), "float32")
            T.copy(A[0, 0], A0)
            T.copy(B[0, 0], B0)
            T.copy(B[0, 0], B1)
            T.gemm(A0, B0, S, clear_accum=True)
            T.clear(O1)
            T.clear(O2)
            for i, j in T.Parallel(128, 64):
                S1[i, j] = T.cast(S[i, j], "float16")
            T.gemm(S1, B1, O1)
            for i, j in T.Parallel(128, 64):
                S2[i, j] = T.cast(S[i, j] * 2.0, "float16")
            T.gemm(S2, B1, O2)
            for i, j in T.Parallel(128, 128):
                O1[i, j] = O1[i, j] + O2[i, j]
            T.copy(O1, C)
    return main


def test_gemms_with_a_from_registers_hold_their_packed_a_until_their_waits():
    before, after = around(rs_gemms(), SM90, overlap_independent_gemms)
    rs = [g for g in nodes(after, Gemm) if g.a.buffer.name in ("S1", "S2")]
    assert [type(g.plan).__name__ for g in rs] == ["WgmmaRSPlan", "WgmmaRSPlan"], [g.plan for g in rs]
    assert [g.async_groups for g in rs] == [1, 1] and [g.held.name for g in rs] == ["O1_held", "O2_held"]
    stmts = gemm_seq(after)
    kinds = []
    for st in stmts:
        if isinstance(st, Gemm):
            kinds.append("gemm " + st.c.buffer.name)
        elif waits(st):
            kinds.append("wait %d %s" % waits(st)[0])
        elif isinstance(st, Alloc):
            kinds.append("alloc " + st.buffer.name)
        elif collect(st, lambda n: isinstance(n, IntrinsicCall)):
            kinds.append("fence " + collect(st, lambda n: isinstance(n, IntrinsicCall))[0].args[0].buffer.name)
        elif isinstance(st, For):
            kinds.append("for")
    g = kinds.index("gemm O1")
    # S2 = cast(2 S) runs while O1's gemm does; each held set is released after its gemm's wait
    assert kinds[g - 2:g + 8] == ["alloc O1_held", "alloc O2_held", "gemm O1", "for", "gemm O2", "wait 1 O1",
                                  "fence O1_held", "wait 0 O2", "fence O2_held", "for"], kinds


def test_a_shared_write_before_the_second_use_takes_the_wait_before_it():
    _, after = around(two_gemms(between_write_shared=True), SM90, overlap_independent_gemms)
    stmts = gemm_seq(after)
    i_wait0 = next(i for i, s in enumerate(stmts) if waits(s) == [(0, "P1")])
    i_copy = max(i for i, s in enumerate(stmts) if isinstance(s, Copy) and s.dst.buffer.name == "S")
    assert waits(after.body) == [(1, "P0"), (0, "P1")] and i_wait0 < i_copy


def test_gemms_into_one_accumulator_stay_in_order():
    before, after = around(two_gemms(dependent=True), SM90, overlap_independent_gemms)
    assert after is before


def test_the_switch_turns_it_off():
    before, after = around(two_gemms(), SM90, overlap_independent_gemms, {"tc.overlap_independent_gemms": False})
    assert after is before


class _InOrder(set):
    """A set that iterates in a given order (the order another process's string hashing could give)."""

    def __init__(self, items):
        super().__init__(items)
        self._order = list(items)

    def __iter__(self):
        return iter(self._order)


def test_a_reductions_butterflies_do_not_follow_a_sets_order(monkeypatch):
    """The lanes a reduction combines are found as a set of layout digit names, whose iteration
    order differs from one process to the next; the shuffles' order is the sum's rounding order, so
    the generated code must be the same for every order (it was not: fuzz seed 7 program 104 came out
    as `<SumOp, 1, 16>` or `<SumOp, 16, 1>` by PYTHONHASHSEED)."""
    from tilecraft.ir.layout.fragment import FragmentLayout
    from tilecraft.testing.fuzz_build import lower

    @T.prim_func
    def main(X: T.Tensor((16, 9), "bfloat16"), Y: T.Tensor((16, 9), "float32"), S: T.Tensor((16,), "float32")):
        with T.Kernel(T.ceildiv(16, 8), threads=32) as bx:
            a = T.alloc_fragment((8, 16), "float32")
            mx = T.alloc_fragment((8,), "float32")
            b = T.alloc_fragment((8, 16), "float32")
            r = T.alloc_fragment((8,), "float32")
            T.copy(X[bx * 8, 0], a)
            T.reduce_max(a, mx, dim=1)
            for i, j in T.Parallel(8, 16):   # b's layout follows mx's: a row over lanes 1 and 16
                b[i, j] = T.cast(j, "float32") + mx[i]
            T.reduce_sum(b, r, dim=1)
            T.copy(b, Y[bx * 8, 0])
            T.copy(r, S[bx * 8])

    uses = FragmentLayout.uses
    sources = []
    for reverse in (False, True):
        monkeypatch.setattr(FragmentLayout, "uses", lambda self, dim, rv=reverse: _InOrder(sorted(uses(self, dim), reverse=rv)))
        sources.append(lower(main, SM80, {}))
    assert "tc::shfl_xor_reduce<tc::SumOp, 1, 16>" in sources[0]
    assert sources[0] == sources[1]

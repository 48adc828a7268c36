"""CPU passes, IR in / IR out: `check_regions`, `lower_tile_ops_cpu`, `legalize_global_access`,
and the pipeline order."""
from __future__ import annotations

import pytest

import tilecraft
import tilecraft.language as T
from tilecraft.ir import Copy, For, If, Load, Select, Store, TileOp, collect
from tilecraft.target import Target
from tilecraft.transform.check_regions import check_regions
from tilecraft.transform.legalize_global_access import legalize_global_access
from tilecraft.transform.lower_tile_ops_cpu import lower_tile_ops_cpu
from tilecraft.transform.pipeline import CPU_PIPELINE, PassContext, run_pipeline

CPU_TARGET = Target.resolve("cpu")
CPU = PassContext(CPU_TARGET)   # what every pass receives (transform/pipeline.py)


def vadd(N, block):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
    return main


def tile_copy(M, N, bm, bn):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            S = T.alloc_shared((bm, bn), "float16")
            F = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], S)
            T.copy(S, F)
            for i, j in T.Parallel(bm, bn):
                F[i, j] = F[i, j] + S[i, j]
            T.copy(F, B[by * bm, bx * bn])
    return main


def global_guards(func):
    """(guarded global stores, guarded global loads) after legalization."""
    out = legalize_global_access(func, CPU)
    ifs = collect(out.body, lambda n: isinstance(n, If) and isinstance(n.then, Store) and n.then.buffer.scope == "global")
    sels = collect(out.body, lambda n: isinstance(n, Select) and isinstance(n.a, Load) and n.a.buffer.scope == "global")
    return out, ifs, sels


# ---- legalize_global_access ------------------------------------------------------------------

def test_aligned_accesses_get_no_guard():
    func = vadd(1024, 256)
    out, ifs, sels = global_guards(func)
    assert not ifs and not sels
    assert out.body is func.body  # nothing changed, nothing rebuilt


def test_ragged_accesses_get_guards_on_loads_and_stores():
    out, ifs, sels = global_guards(vadd(1000, 256))
    assert len(ifs) == 1 and ifs[0].then.buffer.name == "C"
    assert {s.a.buffer.name for s in sels} == {"A", "B"}
    text = out.script()
    assert "< 1000" in text and ">= 0" not in text  # indices are provably non-negative


def test_lowered_copies_guarded_only_on_the_ragged_global_side():
    aligned = legalize_global_access(lower_tile_ops_cpu(tile_copy(32, 64, 16, 32), CPU), CPU)
    assert not collect(aligned.body, lambda n: isinstance(n, (If, Select)))
    ragged = legalize_global_access(lower_tile_ops_cpu(tile_copy(30, 60, 16, 32), CPU), CPU)
    guarded = collect(ragged.body, lambda n: isinstance(n, If) and isinstance(n.then, Store))
    assert {s.then.buffer.name for s in guarded} == {"B"}
    selects = collect(ragged.body, lambda n: isinstance(n, Select))
    assert {s.a.buffer.name for s in selects} == {"A"}
    # on-chip buffers are never guarded
    assert not any(s.then.buffer.scope != "global" for s in guarded)


def test_possibly_negative_index_gets_lower_bound_guard():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(2) as bx:
            for i in T.Parallel(32):
                B[bx * 32 + i] = A[bx * 32 + i - 1]
    out, ifs, sels = global_guards(main)
    assert not ifs and len(sels) == 1
    assert ">= 0" in out.script() and "< 64" not in out.script()


def test_symbolic_size_is_always_guarded():
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 32)) as bx:
            for i in T.Parallel(32):
                B[bx * 32 + i] = A[bx * 32 + i]
    _, ifs, sels = global_guards(main)
    assert len(ifs) == 1 and len(sels) == 1


def test_atomic_on_ragged_global_is_guarded():
    @T.prim_func
    def main(A: T.Tensor((50,), "float32"), S: T.Tensor((50,), "float32")):
        with T.Kernel(2) as bx:
            for i in T.Parallel(32):
                T.atomic_add(S[bx * 32 + i], A[bx * 32 + i])
    out = legalize_global_access(lower_tile_ops_cpu(main, CPU), CPU)
    text = out.script()
    assert "atomic_add" in text and "if " in text and "< 50" in text


# ---- lower_tile_ops_cpu -------------------------------------------------------------------------

def test_lowering_removes_every_tile_op_and_keeps_order():
    func = tile_copy(32, 64, 16, 32)
    assert len(collect(func.body, lambda n: isinstance(n, Copy))) == 3
    low = lower_tile_ops_cpu(func, CPU)
    assert not collect(low.body, lambda n: isinstance(n, TileOp))
    stores = [s.buffer.name for s in collect(low.body, lambda n: isinstance(n, Store))]
    assert stores == ["S", "F", "F", "B"]  # copy, copy, user loop, copy: program order


def test_lowered_copy_casts_to_destination_dtype():
    low = lower_tile_ops_cpu(tile_copy(32, 64, 16, 32), CPU)
    to_f = [s for s in collect(low.body, lambda n: isinstance(n, Store)) if s.buffer.name == "F"][0]
    assert to_f.value.dtype.name == "float32"
    assert 'T.cast(S[' in low.script()


def test_lowered_gemm_with_a_float32_accumulator_calls_the_micro_kernel():
    @T.prim_func
    def main(A: T.Tensor((16, 8), "float16"), B: T.Tensor((8, 12), "float16")):
        with T.Kernel(1) as bx:
            A_s = T.alloc_shared((16, 8), "float16")
            B_s = T.alloc_shared((8, 12), "float16")
            C_f = T.alloc_fragment((16, 12), "float32")
            T.gemm(A_s, B_s, C_f, transpose_B=False)
    low = lower_tile_ops_cpu(main, CPU)
    assert not collect(low.body, lambda n: isinstance(n, TileOp))
    text = low.script()
    # one call of the register-blocked micro-kernel, with the tile's shape and row-major strides
    assert text.count("tc.gemm_f32acc<") == 1
    assert "m=16, n=12, k=8, a_strides=(8, 1), b_strides=(12, 1), c_strides=(12, 1)" in text


def test_lowering_a_body_without_tile_ops_returns_the_same_object():
    func = vadd(1024, 256)
    assert lower_tile_ops_cpu(func, CPU) is func


# ---- check_regions and the pipeline ----------------------------------------------------------------

def test_check_regions_accepts_in_range_programs_unchanged():
    func = tile_copy(30, 60, 16, 32)
    assert check_regions(func, CPU) is func


def test_check_regions_rejects_shared_index_past_the_end():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            S = T.alloc_shared((8,), "float32")
            for i in T.serial(9):
                S[i] = 0.0
    with pytest.raises(tilecraft.TilecraftError, match=r"S .*shared.*size 8"):
        check_regions(main, CPU)


def test_pipeline_order_and_trace():
    assert [p.__name__ for p in CPU_PIPELINE] == ["validate", "check_regions", "lower_manual_sync_cpu",
                                                 "fuse_gemm_k_loops_cpu", "lower_tile_ops_cpu", "legalize_global_access"]
    trace = []
    out = run_pipeline(tile_copy(30, 60, 16, 32), CPU_TARGET, trace=trace)
    assert [name for name, _ in trace] == [p.__name__ for p in CPU_PIPELINE]
    assert trace[-1][1] is out
    assert not collect(out.body, lambda n: isinstance(n, TileOp))

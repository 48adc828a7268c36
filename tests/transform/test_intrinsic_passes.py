"""insert_syncs and legalize_global_access on hand-built thread-level IR with typed intrinsics: each
test builds a small kernel, runs the pass and compares the printed IR before and after.

The passes must reason from the intrinsics' declared effects (ir/intrinsics), never their names:
the last tests give two made-up intrinsics misleading names and check that only the declarations
count."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

import pytest

from tilecraft.errors import InternalCompilerError
from tilecraft.ir import Buffer, For, Kernel, Load, Ref, Store, Sync, Var, binary, const, seq, to_text, dtype as dt
from tilecraft.ir import intrinsics as I
from tilecraft.ir.expr import thread_index
from tilecraft.ir.func import PrimFunc
from tilecraft.ir.intrinsics.base import PTR, READ, TMA, WRITE, Effects, Intrinsic, Operand
from tilecraft.target import Target
from tilecraft.transform.insert_syncs import insert_syncs
from tilecraft.transform.legalize_global_access import legalize_global_access
from tilecraft.transform.pipeline import PassContext

SM90 = PassContext(Target.resolve({"kind": "cuda", "arch": "sm_90a"}))   # what every pass receives
tid = thread_index()
bx = Var("bx")
A = Buffer("A", (100,), dt.float16, "global")      # ragged: 2 blocks of 64 cover 128 elements
S = Buffer("S", (256,), dt.float16, "shared")
R = Buffer("R", (8,), dt.float16, "local")
BAR = Buffer("bar", (2,), dt.uint64, "shared")

G_ADDR = Ref(A, (binary("+", binary("*", bx, 64), binary("*", tid, 8)),))  # bx * 64 + tc_tid * 8
S_ADDR = Ref(S, (binary("*", tid, 8),))


def kernel(*stmts) -> PrimFunc:
    return PrimFunc("f", (A,), Kernel((const(2),), (bx,), (32, 1, 1), seq(*stmts)))


def read_neighbour():
    """A read of another thread's element of S."""
    return Store(R, (const(0),), Load(S, (binary("%", binary("+", tid, 1), 32),)))


def body_text(func: PrimFunc) -> str:
    """The kernel body's lines, without the signature, dedented."""
    lines = to_text(func).splitlines()[3:]
    return textwrap.dedent("\n".join(lines)).strip()


def expect(text: str) -> str:
    return textwrap.dedent(text).strip()


# ---- insert_syncs ---------------------------------------------------------------------------------

def test_a_cp_async_write_then_another_threads_read_gets_one_barrier_after_the_wait():
    func = kernel(I.evaluate(I.CpAsyncZfill(16), S_ADDR, G_ADDR), I.evaluate(I.CpAsyncCommit()),
                  I.evaluate(I.CpAsyncWaitAll()), read_neighbour())
    before = expect("""
        tc.cp_async_zfill<nbytes=16>(T.address_of(S[tc_tid * 8]), T.address_of(A[bx * 64 + tc_tid * 8]))
        tc.cp_async_commit()
        tc.cp_async_wait_all()
        R[0] = S[(tc_tid + 1) % 32]
    """)
    assert body_text(func) == before
    assert body_text(insert_syncs(func, SM90)) == expect("""
        tc.cp_async_zfill<nbytes=16>(T.address_of(S[tc_tid * 8]), T.address_of(A[bx * 64 + tc_tid * 8]))
        tc.cp_async_commit()
        tc.cp_async_wait_all()
        T.sync_threads()
        R[0] = S[(tc_tid + 1) % 32]
    """)


def test_copies_a_pipeline_orders_itself_get_no_barrier():
    func = kernel(I.evaluate(I.CpAsyncPipelinedZfill(16), S_ADDR, G_ADDR), read_neighbour(),
                  I.evaluate(I.TmaLoadTile(), Ref(S, (const(0),)), const(0), Var("desc"), Ref(BAR, (const(0),)),
                             const(0), const(0)),
                  read_neighbour())
    assert body_text(insert_syncs(func, SM90)) == body_text(func)


def test_mbarrier_operands_are_not_data():
    """init, wait and invalidate of the same mbarrier word: no barrier between them (each protocol
    places its own around init and invalidation)."""
    b0 = Ref(BAR, (const(0),))
    func = kernel(I.evaluate(I.MbarInit(), b0, const(1)), I.evaluate(I.MbarWaitParity(), b0, const(0)),
                  I.evaluate(I.MbarInval(), b0))
    assert body_text(insert_syncs(func, SM90)) == expect("""
        tc.mbar_init(T.address_of(bar[0]), 1)
        tc.mbar_wait_parity(T.address_of(bar[0]), 0)
        tc.mbar_inval(T.address_of(bar[0]))
    """)


def test_a_read_after_an_atomic_update_of_shared_memory_waits_but_the_update_loop_does_not():
    e = Var("e")
    func = kernel(For(e, const(0), const(4), "unroll",
                      I.evaluate(I.AtomicAdd(), Ref(S, (binary("+", binary("*", e, 32), tid),)), Load(R, (const(0),)))),
                  read_neighbour())
    assert body_text(insert_syncs(func, SM90)) == expect("""
        for e in T.unroll(4):
            tc.atomic_add(T.address_of(S[e * 32 + tc_tid]), R[0])
        T.sync_threads()
        R[0] = S[(tc_tid + 1) % 32]
    """)


def test_a_gemm_reading_shared_tiles_waits_for_their_writers_and_later_writers_wait_for_it():
    B = Buffer("B_s", (32, 64), dt.float16, "shared")
    C = Buffer("C", (16,), dt.float32, "local")
    A_s = Buffer("A_s", (64, 32), dt.float16, "shared")
    gemm = I.evaluate(I.GemmSS(64, 64, 32, 2, 2, False, False, 1, 1, dt.float16),
                      Ref(A_s, (const(0), const(0))), Ref(B, (const(0), const(0))), Ref(C, (const(0),)))
    func = kernel(Store(A_s, (tid, const(0)), Load(R, (const(0),))), gemm,
                  I.evaluate(I.VecStore(dt.float16, dt.float16, 8), Ref(B, (tid, const(0))), Ref(R, (const(0),))))
    assert body_text(insert_syncs(func, SM90)) == expect("""
        A_s[tc_tid, 0] = R[0]
        T.sync_threads()
        tc.gemm_ss<m=64, n=64, k=32, wm=2, wn=2, trans_a=False, trans_b=False, swz_a=1, swz_b=1, dtype=float16>(T.address_of(A_s[0, 0]), T.address_of(B_s[0, 0]), T.address_of(C[0]))
        T.sync_threads()
        tc.vec_store<dst=float16, src=float16, vec=8>(T.address_of(B_s[tc_tid, 0]), T.address_of(R[0]))
    """)


@dataclass(frozen=True)
class _PipelinedLookingWrite(Intrinsic):
    """Named like a pipelined copy, declared as a plain shared-memory write."""
    entry = "tc::cp_async_pipelined_tma_lookalike"
    operands = (Operand("dst", PTR, WRITE, ("shared",)),)


@dataclass(frozen=True)
class _PlainLookingAsyncCopy(Intrinsic):
    """Named like nothing special, declared as ordered by its pipeline."""
    entry = "tc::store_thing"
    operands = (Operand("dst", PTR, WRITE, ("shared",)), Operand("src", PTR, READ, ("global",)))
    effects = Effects(proxy=TMA, pipeline_ordered=True)


def test_sync_insertion_reads_declarations_not_names():
    func = kernel(I.evaluate(_PipelinedLookingWrite(), S_ADDR), read_neighbour(),
                  I.evaluate(_PlainLookingAsyncCopy(), S_ADDR, G_ADDR), read_neighbour())
    out = body_text(insert_syncs(func, SM90))
    assert out == expect("""
        tc.cp_async_pipelined_tma_lookalike(T.address_of(S[tc_tid * 8]))
        T.sync_threads()
        R[0] = S[(tc_tid + 1) % 32]
        tc.store_thing(T.address_of(S[tc_tid * 8]), T.address_of(A[bx * 64 + tc_tid * 8]))
        R[0] = S[(tc_tid + 1) % 32]
    """)


# ---- legalize_global_access -----------------------------------------------------------------------

def test_a_zfill_copy_gets_the_bounds_as_its_predicate_not_a_guard():
    func = kernel(I.evaluate(I.CpAsyncZfill(16), S_ADDR, G_ADDR),
                  I.evaluate(I.VecLoadZfill(dt.float16, dt.float16, 8), Ref(R, (const(0),)), Ref(S, (const(0),))))
    assert body_text(legalize_global_access(func, SM90)) == expect("""
        tc.cp_async_zfill<nbytes=16>(T.address_of(S[tc_tid * 8]), T.address_of(A[bx * 64 + tc_tid * 8]), bx * 64 + tc_tid * 8 < 100)
        tc.vec_load_zfill<dst=float16, src=float16, vec=8>(T.address_of(R[0]), T.address_of(S[0]), True)
    """)


def test_stores_and_atomics_to_global_memory_are_guarded():
    func = kernel(I.evaluate(I.VecStore(dt.float16, dt.float16, 8), G_ADDR, Ref(R, (const(0),))),
                  I.evaluate(I.AtomicMax(), Ref(A, (tid,)), Load(R, (const(0),))))
    assert body_text(legalize_global_access(func, SM90)) == expect("""
        if bx * 64 + tc_tid * 8 < 100:
            tc.vec_store<dst=float16, src=float16, vec=8>(T.address_of(A[bx * 64 + tc_tid * 8]), T.address_of(R[0]))
        tc.atomic_max(T.address_of(A[tc_tid]), R[0])
    """)


@dataclass(frozen=True)
class _ZfillNamedCopy(Intrinsic):
    """Named like a zero-filling load, declared as an ordinary one."""
    entry = "tc::load_zfill"
    operands = (Operand("dst", PTR, WRITE, ("local",)), Operand("src", PTR, READ, ("global",)))


def test_legalization_reads_the_zfill_declaration_not_the_name():
    """A read of global memory that may fall outside, into registers, by a call not declared zfill: skipping
    the call (the old rule) would leave the registers stale where the tile copy's meaning is zeros -- a
    silent wrong answer.  The pass refuses it as a compiler bug, whatever the call is named."""
    func = kernel(I.evaluate(_ZfillNamedCopy(), Ref(R, (const(0),)), G_ADDR))
    with pytest.raises(InternalCompilerError, match=r"tc::load_zfill reads A where it may be out of range but has "
                                                    r"no zero-fill predicate"):
        legalize_global_access(func, SM90)


def test_a_converting_vector_copy_reads_zeros_outside_and_skips_writes_outside():
    """tc::vec_convert (zfill): from global, the bound is its predicate (zeros outside); into global, the
    call is skipped outside (never a store past the tensor)."""
    S32 = Buffer("S32", (256,), dt.float32, "shared")
    load = kernel(I.evaluate(I.VecConvert(dt.float32, dt.float16, 4), Ref(S32, (binary("*", tid, 8),)), G_ADDR))
    assert body_text(legalize_global_access(load, SM90)) == expect("""
        tc.vec_convert<dst=float32, src=float16, vec=4>(T.address_of(S32[tc_tid * 8]), T.address_of(A[bx * 64 + tc_tid * 8]), bx * 64 + tc_tid * 8 < 100)
    """)
    store = kernel(I.evaluate(I.VecConvert(dt.float16, dt.float32, 4), G_ADDR, Ref(S32, (binary("*", tid, 8),))))
    assert body_text(legalize_global_access(store, SM90)) == expect("""
        if bx * 64 + tc_tid * 8 < 100:
            tc.vec_convert<dst=float16, src=float32, vec=4>(T.address_of(A[bx * 64 + tc_tid * 8]), T.address_of(S32[tc_tid * 8]), True)
    """)


def test_nothing_changes_when_every_access_is_in_bounds():
    inside = Ref(A, (binary("+", binary("*", bx, 32), tid),))  # at most 32 + 31 < 100
    func = kernel(I.evaluate(I.VecStore(dt.float16, dt.float16, 1), inside, Ref(R, (const(0),))), Sync())
    out = legalize_global_access(func, SM90)
    assert body_text(out) == body_text(func)

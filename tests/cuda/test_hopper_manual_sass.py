"""The manual Hopper constructs compiled for sm_90a (and sm_80) without a GPU: what the generated
code and its SASS must contain.  The programs and their CPU / GPU runs against torch are in
tests/cpu/test_hopper_manual.py."""
from __future__ import annotations

import os
import re
import sys
import warnings

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_hopper_manual import gemm_barrier_ring, gemm_roles, gemm_split_n, gemm_two_barriers  # noqa: E402

pytestmark = pytest.mark.cuda_compile
SM90 = {"kind": "cuda", "arch": "sm_90a"}
SM80 = {"kind": "cuda", "arch": "sm_80"}


def _compile(factory, *args, target=SM90):
    kw = factory.compile_kwargs
    return tilelang.compile(factory.fn(*args), out_idx=kw["out_idx"], target=target)


def _branches(src: str) -> list:
    """The text of each `if (tc_tid >= lo && tc_tid < hi) {` branch the T.ws blocks print as."""
    out = []
    for m in re.finditer(r"if \(tc_tid >= (\d+) && tc_tid < (\d+)\) \{", src):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        out.append((int(m.group(1)), int(m.group(2)), src[m.end():i]))
    return out


def test_branches_guard_by_warp_group_and_sync_among_themselves():
    src = _compile(gemm_two_barriers, 256, 256, 256, 128, 128, 64, 0, 1).get_kernel_source()
    branches = _branches(src)
    assert {(lo, hi) for lo, hi, _ in branches} == {(0, 128), (128, 256)}
    for lo, _, body in branches:
        assert "__syncthreads" not in body, "a block barrier inside a branch would hang the other warp group"
        if "named_barrier_sync" in body:
            assert f"tc::named_barrier_sync<{2 + lo // 128}, 128>()" in body
    # a 128-thread wgmma gemm in warp group 1, threads indexed from the branch's first one
    assert "tc::gemm_ss_sm90<128, 128, 64, 1," in src and "(tc_tid - 128)" in src
    assert src.count("tc::mbar_init(") == 2 and src.count("tc::mbar_arrive(") == 2
    assert src.count("tc::mbar_wait_parity(") == 2
    # the producer's generic-proxy writes reach the consumer's wgmma through the async-proxy fence
    producer = next(body for lo, _, body in branches if lo == 0 and "mbar_arrive" in body)
    assert producer.index("tc::fence_proxy_async_shared()") < producer.index("tc::mbar_arrive(")


@pytest.mark.sass
def test_sass_has_mbarrier_wgmma_and_named_barriers():
    ops = set(re.findall(r"\b([A-Z][A-Z0-9]+(?:\.[A-Z0-9]+)*)", _compile(gemm_barrier_ring, 256, 256, 256, 128, 128, 64)
                         .get_sass()))
    # (the gemm reads a stage of a 3-D tile: mma.sync, HMMA; wgmma takes whole tiles only)
    for needed in ("SYNCS.ARRIVE.TRANS64.A1T0", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "HMMA", "BAR.SYNC"):
        assert any(o.startswith(needed) for o in ops), (needed, sorted(ops))


@pytest.mark.sass
def test_set_max_nreg_becomes_setmaxnreg_on_sm90a():
    k = _compile(gemm_roles, 128, 128, 256, 128, 128, 64)   # ptxas warns (an error in tests) if it ignores them
    src = k.get_kernel_source()
    assert "tc::warpgroup_reg_dealloc<40>()" in src and "tc::warpgroup_reg_alloc<232>()" in src
    assert "__launch_bounds__(256, 1)" in src, "one block per SM, so the budgets setmaxnreg moves exist"
    assert "USETMAXREG" in k.get_sass()


@pytest.mark.sass
def test_mla_decode_ws_fits_two_blocks_without_spills():
    """The fp8-KV MLA decode kernel warp-specialized by hand: 256 threads in at most 128 registers each (two
    blocks an SM) and nothing spilled.  (Budgets by T.set_max_nreg would not help: two blocks need
    __launch_bounds__(256, 2), and ptxas then compiles every role within the launch's 128 registers anyway.
    The fp8 tile held in registers across the stage wait, widen_from="regs", spills 328 bytes.)"""
    from tilecraft.compiler.sass import resource_usage
    from tilecraft.kernels import decode as D
    k = tilelang.compile(D.mla_decode_split_ws.get_tir(64, 16, 8192, num_split=4), out_idx=[-2, -1], target=SM90,
                         pass_configs={"tl.enable_fast_math": True})
    assert "__launch_bounds__(256)" in k.get_kernel_source() and "warpgroup_reg" not in k.get_kernel_source()
    use = resource_usage(k.artifact.binary)["main_kernel"]
    assert use["registers"] <= 128 and use["stack_bytes"] == 0, use


def test_set_max_nreg_warns_and_is_dropped_on_sm80():
    from tilecraft.transform import lower_manual_sync_cpu as m
    m._WARNED.clear()
    with pytest.warns(UserWarning, match=r"T.set_max_nreg .* do not apply on sm_80"):
        k = _compile(gemm_roles, 128, 128, 128, 128, 128, 64, target=SM80)
    assert "warpgroup_reg" not in k.get_kernel_source()


def test_automatic_pipelining_leaves_a_hand_specialized_kernel_alone():
    k = _compile(gemm_split_n, 256, 256, 256, 128, 128, 64)
    src = k.get_kernel_source()
    assert "pipe_" not in src and "tma_load" not in src and "warpgroup_reg" not in src
    assert "not pipelined by the compiler" in k.get_plan()
    assert "__launch_bounds__(256)" in src  # no extra producer warp group


def test_fragment_shared_between_branches_is_an_error():
    import tilecraft.language as T
    from tilecraft.errors import TilecraftError

    @T.prim_func
    def main(X: T.Tensor((128, 64), "float32"), Y: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=256) as bx:
            f = T.alloc_fragment((128, 64), "float32")
            with T.ws(0):
                T.copy(X, f)
            with T.ws(1):
                T.copy(f, Y)
    with pytest.raises(TilecraftError, match=r"fragment f is used by T.ws\(0,\) and by T.ws\(1,\)"):
        tilelang.compile(main, out_idx=[1], target=SM90)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = __import__("torch").randn(128, 64)   # the CPU reference has no registers: it runs
        y = tilelang.compile(main, out_idx=[1], target="cpu")(x)
    assert (y == x).all()


def roles_by_thread_index(M, N, K, bm=64, bn=64, bk=64, producer_regs=24):
    """TileLang's other way to specialize warp groups (its MLA programs): `if`s on the thread
    index around tile work, a producer storing elements itself with thread-relative indices and
    arriving with T.cp_async_barrier_noinc; three warp groups."""
    import tilecraft.language as T

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16"),
             D: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=384) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C0 = T.alloc_fragment((bm, bn), "float32")
            C1 = T.alloc_fragment((bm, bn), "float32")
            full = T.alloc_barrier(128)
            empty = T.alloc_barrier(256)
            tx = T.get_thread_binding()
            if tx < 128:
                T.set_max_nreg(240, 1)
                T.clear(C0)
                for ko in T.serial(T.ceildiv(K, bk)):
                    T.barrier_wait(full, ko % 2)
                    T.gemm(A_s, B_s, C0)
                    T.barrier_arrive(empty)
                T.copy(C0, C[by * bm, bx * bn])
            elif tx >= 128 and tx < 256:
                T.set_max_nreg(240, 1)
                T.clear(C1)
                for ko in T.serial(T.ceildiv(K, bk)):
                    T.barrier_wait(full, ko % 2)
                    T.gemm(A_s, B_s, C1)
                    T.barrier_arrive(empty)
                for i, j in T.Parallel(bm, bn):
                    C1[i, j] = C1[i, j] * 0.5
                T.copy(C1, D[by * bm, bx * bn])
            else:
                T.set_max_nreg(producer_regs, 0)
                for ko in T.serial(T.ceildiv(K, bk)):
                    T.barrier_wait(empty, (ko + 1) % 2)
                    for r in T.serial(bm // 16):
                        for v in T.vectorized(8):
                            A_s[r * 16 + (tx - 256) // 8, (tx - 256) % 8 * 8 + v] = A[
                                by * bm + r * 16 + (tx - 256) // 8, ko * bk + (tx - 256) % 8 * 8 + v]
                            B_s[r * 16 + (tx - 256) // 8, (tx - 256) % 8 * 8 + v] = B[
                                ko * bk + r * 16 + (tx - 256) // 8, bx * bn + (tx - 256) % 8 * 8 + v]
                    T.cp_async_barrier_noinc(full)
    return main


def test_thread_index_ifs_become_warp_group_branches():
    k = tilelang.compile(roles_by_thread_index(128, 128, 256), out_idx=[2, 3], target=SM90)
    src = k.get_kernel_source()
    assert {(lo, hi) for lo, hi, _ in _branches(src)} == {(0, 128), (128, 256), (256, 384)}
    assert src.count("tc::gemm_ss_sm90<64, 64, 64, 1,") == 2, "each consumer's gemm on its own warp group"
    assert "__syncthreads" not in "".join(body for _, _, body in _branches(src))
    assert src.count("tc::mbar_arrive(") == 3   # the noinc arrival included
    assert "__launch_bounds__(384, 1)" in src


def test_register_budgets_above_the_register_file_are_refused():
    # 240 + 240 + 40 registers x 128 threads = 66,560 > 65,536: setmaxnreg.inc would wait forever
    # (this program hung on the H200 before the check)
    with pytest.raises(tilelang.TilecraftError, match=r"66560 registers in all.*hangs") as e:
        tilelang.compile(roles_by_thread_index(128, 128, 256, producer_regs=40), out_idx=[2, 3], target=SM90)
    assert "test_hopper_manual_sass.py" in str(e.value)


def test_unaligned_thread_index_if_stays_an_if():
    # `tx < 64` is not a warp-group boundary: an ordinary branch (T.sync_threads(3, 64) inside)
    import test_named_barrier
    src = tilelang.compile(test_named_barrier.prefix_sum_first_warps(), out_idx=[-1], target=SM90).get_kernel_source()
    assert "tc_tid >= 0 && tc_tid < 64" not in src and "tc::named_barrier_sync<3, 64>()" in src


def test_small_shared_buffers_keep_1024_alignment_when_the_kernel_fits():
    # the layout the Hopper kernels were measured and checked with
    k = _compile(gemm_two_barriers, 256, 256, 256, 128, 128, 64, 0, 1)
    offs = re.findall(r"reinterpret_cast<tc::uint64_t\*>\(tc_smem \+ (\d+)\)", k.get_kernel_source())
    assert offs and all(int(o) % 1024 == 0 for o in offs)


def _tight(n_small):
    """Two 16 KB wgmma tiles, a 192 KB staging buffer and `n_small` row vectors of 256 bytes, all live
    at once: over sm_90a's 227 KB when every buffer takes 1024 bytes, under it at 128."""
    import tilecraft.language as T

    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"),
             Big: T.Tensor((768, 128), "float16"), V: T.Tensor((64,), "float32"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((128, 64), "float16")
            b_s = T.alloc_shared((64, 128), "float16")
            big = T.alloc_shared((768, 128), "float16")
            vs = [T.alloc_shared((64,), "float32") for _ in range(n_small)]
            acc = T.alloc_fragment((128, 128), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(Big, big)
            for v in vs:
                T.copy(V, v)
            T.clear(acc)
            T.gemm(a_s, b_s, acc)
            for i, j in T.Parallel(128, 128):
                acc[i, j] += big[i, j]
            for v in vs:  # unrolled: every vector is live from its copy to here
                for i, j in T.Parallel(128, 128):
                    acc[i, j] += v[j % 64]
            T.copy(acc, C)
    return main


def test_small_shared_buffers_fill_the_gaps_when_1024_alignment_does_not_fit():
    import tilecraft as tl
    src = tl.compile(_tight(6), out_idx=[-1], target=SM90).get_kernel_source()
    offs = [int(o) for o in re.findall(r"reinterpret_cast<float\*>\(tc_smem \+ (\d+)\)", src)]
    assert len(offs) == 6 and any(o % 1024 for o in offs), offs


@pytest.mark.parametrize("factory,args", [(gemm_two_barriers, (256, 256, 256, 128, 128, 64, 1, 0)),
                                          (gemm_barrier_ring, (256, 256, 256, 128, 128, 64)),
                                          (gemm_split_n, (256, 256, 256, 128, 128, 64))])
def test_branches_compile_for_sm80_on_mma_sync(factory, args):
    src = _compile(factory, *args, target=SM80).get_kernel_source()
    assert "tc::gemm_ss<" in src and "gemm_ss_sm90" not in src
    for _, _, body in _branches(src):
        assert "__syncthreads" not in body


def test_no_block_barrier_between_role_branches():
    """Roles that run whole loops in their branches: a block barrier between two branches would
    never be reached by every thread (the first role waits for the second's arrivals).  The
    barrier the whole block's copy before them needs goes before the first branch."""
    import tilecraft.language as T

    @T.prim_func
    def main(X: T.Tensor((128, 64), "float16"), A: T.Tensor((64, 64), "float16"), Y: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=256) as bx:
            Q = T.alloc_shared((64, 64), "float16")
            K_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            full = T.alloc_barrier(128)
            empty = T.alloc_barrier(128)
            T.copy(A, Q)                      # the whole block; only the producer reads Q
            with T.ws(0):
                T.clear(acc)
                for k in T.serial(2):
                    T.barrier_wait(full, k % 2)
                    T.gemm(K_s, B_s, acc)
                    T.barrier_arrive(empty)
                T.copy(acc, Y[0:64, :])
            with T.ws(1):
                for k in T.serial(2):
                    T.barrier_wait(empty, (k + 1) % 2)
                    T.copy(X[k * 64:(k + 1) * 64, :], K_s)
                    T.copy(Q, B_s)
                    T.barrier_arrive(full)
    src = tilelang.compile(main, out_idx=[2], target=SM90).get_kernel_source()
    first, second = src.index("// T.ws(0,)"), src.index("// T.ws(1,)")
    between = src[first:second]
    depth_zero_sync = [ln for ln in between.splitlines() if ln.startswith("  __syncthreads")]
    assert not depth_zero_sync, "no block barrier between the two role branches"
    assert "__syncthreads" in src[:first], "the block's copy of Q is fenced before the branches"

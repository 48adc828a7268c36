"""TileLang's manual Hopper constructs on every target (see conftest.py: cpu, cuda, cuda-compile):
`T.ws` branches, program mbarriers (`T.alloc_barrier`, `T.barrier_arrive` / `T.barrier_wait`,
`T.mbarrier_arrive` / `T.mbarrier_wait_parity`) and `T.set_max_nreg`, in the shapes of TileLang's
warp_specialize examples (a producer warp group copying tiles, a consumer warp group multiplying
them), against torch on fresh random inputs.

The CPU target runs a block's statements in program order and simulates the mbarriers where every
wait is satisfied by earlier statements; a program whose waits only concurrently running warp groups
can satisfy runs with the block's threads emulated (transform/cpu_threads.py), and one that would
hang on the GPU stops with an error naming each wait (which threads, file:line)."""
from __future__ import annotations

import inspect
import warnings

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

THIS = __file__.rsplit("/", 1)[-1]


@tilelang.jit(out_idx=[2])
def gemm_two_barriers(M, N, K, bm, bn, bk, producer=0, consumer=1, stages=0):
    """One warp group copies each k-tile of A and B into shared memory and arrives on
    `data_is_ready`; the other waits for it, multiplies, and arrives on `compute_is_done`, which the
    producer waits for before overwriting the tiles (example_warp_specialize_gemm_copy_0_gemm_1)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            data_is_ready = T.alloc_barrier(arrive_count=128)
            compute_is_done = T.alloc_barrier(arrive_count=128)
            with T.ws(consumer):
                T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                with T.ws(producer):
                    T.barrier_wait(compute_is_done, (ko + 1) % 2)
                    T.copy(A[by * bm, ko * bk], A_s)
                    T.copy(B[ko * bk, bx * bn], B_s)
                    T.barrier_arrive(data_is_ready)
                with T.ws(consumer):
                    T.barrier_wait(data_is_ready, ko % 2)
                    T.gemm(A_s, B_s, C_f)
                    T.barrier_arrive(compute_is_done)
            with T.ws(consumer):
                T.copy(C_f, C[by * bm, bx * bn])
    return main


@tilelang.jit(out_idx=[2])
def gemm_barrier_ring(M, N, K, bm, bn, bk, stages=2):
    """A ring of `stages` tiles guarded by a list of mbarriers: full[s] (0..stages-1) and empty[s]
    (stages..2*stages-1), with T.mbarrier_wait_parity / T.mbarrier_arrive
    (example_warp_specialize_gemm_barrierpipe_stage2)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), "float16")
            B_s = T.alloc_shared((stages, bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            bars = T.alloc_barrier([128] * (2 * stages))
            with T.ws(0):
                T.clear(C_f)
            for ko in range(T.ceildiv(K, bk)):
                with T.ws(1):
                    T.mbarrier_wait_parity(mbarrier=bars[ko % stages + stages], parity=((ko // stages) % 2) ^ 1)
                    T.copy(A[by * bm: (by + 1) * bm, ko * bk: (ko + 1) * bk], A_s[ko % stages, :, :])
                    T.copy(B[ko * bk: (ko + 1) * bk, bx * bn: (bx + 1) * bn], B_s[ko % stages, :, :])
                    T.mbarrier_arrive(mbarrier=bars[ko % stages])
                with T.ws(0):
                    T.mbarrier_wait_parity(mbarrier=bars[ko % stages], parity=(ko // stages) % 2)
                    T.gemm(A_s[ko % stages, :, :], B_s[ko % stages, :, :], C_f)
                    T.mbarrier_arrive(mbarrier=bars[ko % stages + stages])
            with T.ws(0):
                T.copy(C_f, C[by * bm, bx * bn])
    return main


@tilelang.jit(out_idx=[2])
def gemm_split_n(M, N, K, bm, bn, bk):
    """Both warp groups load A together; each loads and multiplies its own half of B's columns
    (example_warp_specialize_gemm_copy_gemm_0_1): branches without mbarriers."""
    half = bn // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B0 = T.alloc_shared((bk, half), "float16")
            B1 = T.alloc_shared((bk, half), "float16")
            C0 = T.alloc_fragment((bm, half), "float32")
            C1 = T.alloc_fragment((bm, half), "float32")
            with T.ws(1):
                T.clear(C1)
            with T.ws(0):
                T.clear(C0)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=0):
                T.copy(A[by * bm, ko * bk], A_s)
                with T.ws(1):
                    T.copy(B[ko * bk, bx * bn], B1)
                    T.gemm(A_s, B1, C1)
                with T.ws(0):
                    T.copy(B[ko * bk, bx * bn + half], B0)
                    T.gemm(A_s, B0, C0)
            with T.ws(1):
                T.copy(C1, C[by * bm, bx * bn])
            with T.ws(0):
                T.copy(C0, C[by * bm, bx * bn + half])
    return main


def _check_gemm(kernel, device, M, N, K):
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c = kernel(a.to(device), b.to(device)).cpu()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("producer,consumer", [(0, 1), (1, 0)])
def test_producer_consumer_gemm_with_two_barriers(build, device, producer, consumer):
    _check_gemm(build(gemm_two_barriers, 256, 384, 320, 128, 128, 64, producer, consumer), device, 256, 384, 320)


def test_producer_consumer_gemm_ragged(build, device):
    _check_gemm(build(gemm_two_barriers, 200, 136, 96, 128, 128, 32, 0, 1, 2), device, 200, 136, 96)


def test_barrier_ring_with_mbarrier_list(build, device):
    _check_gemm(build(gemm_barrier_ring, 256, 256, 512, 128, 128, 64), device, 256, 256, 512)


def test_two_warp_groups_split_n(build, device):
    _check_gemm(build(gemm_split_n, 256, 256, 192, 128, 128, 64), device, 256, 256, 192)


@tilelang.jit(out_idx=[2])
def gemm_roles(M, N, K, bm, bn, bk, producer_regs=40, consumer_regs=232):
    """The fully specialized form (TileLang's MLA programs): each warp group runs its whole role in
    one branch, its own loop included, after moving registers with T.set_max_nreg (setmaxnreg needs
    each role's remaining code inside its branch).  The roles wait on each other's later
    iterations, so only concurrent warp groups can run it (the CPU target emulates the threads)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            full = T.alloc_barrier(128)
            empty = T.alloc_barrier(128)
            with T.ws(1):
                T.set_max_nreg(producer_regs, 0)
                for ko in T.serial(T.ceildiv(K, bk)):
                    T.barrier_wait(empty, (ko + 1) % 2)
                    T.copy(A[by * bm, ko * bk], A_s)
                    T.copy(B[ko * bk, bx * bn], B_s)
                    T.barrier_arrive(full)
            with T.ws(0):
                T.set_max_nreg(consumer_regs, 1)
                T.clear(C_f)
                for ko in T.serial(T.ceildiv(K, bk)):
                    T.barrier_wait(full, ko % 2)
                    T.gemm(A_s, B_s, C_f)
                    T.barrier_arrive(empty)
                T.copy(C_f, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("M,N,K", [(128, 128, 256), (256, 384, 192)])
def test_roles_with_their_own_loops_run_on_cpu(M, N, K):
    """The roles wait on each other's later iterations: the CPU target runs the block's 256 threads
    as fibers (the tile path's program order cannot), and the result is torch's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # T.set_max_nreg does not apply on the CPU target
        kernel = tilelang.compile(gemm_roles.fn(M, N, K, 128, 128, 64), out_idx=[2], target="cpu")
    assert "one fiber per CUDA thread" in kernel.get_kernel_source()
    _check_gemm(kernel, "cpu", M, N, K)


# ---- CPU semantics: arrivals count the threads that run them; absent warp groups run nothing ----

@tilelang.jit(out_idx=[1], target="cpu")
def arrivals(N, count, arrive_in_branch):
    """Y = X + 1 copied through shared memory by warp group 0, released to warp group 1 by an
    mbarrier expecting `count` arrivals; the arrival is made in warp group 0's branch (128
    threads) or by the whole block (256)."""
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            s = T.alloc_shared((N,), "float32")
            bar = T.alloc_barrier(count)
            with T.ws(0):
                for i in T.Parallel(N):
                    s[i] = X[i] + 1
            if arrive_in_branch:
                with T.ws(0):
                    T.barrier_arrive(bar)
            else:
                T.barrier_arrive(bar)
            with T.ws(1):
                T.barrier_wait(bar, 0)
                T.copy(s, Y)
    return main


@pytest.mark.parametrize("count,in_branch", [(128, True), (256, False)])
def test_cpu_arrivals_complete_a_phase(count, in_branch):
    x = torch.randn(64)
    torch.testing.assert_close(arrivals(64, count, in_branch)(x), x + 1)


# 128 arrivals of 256: phase 0 never completes; 256 arrivals of 128: phases 0 and 1 complete, so
# phase 2 (parity 0 again) is running and a wait for parity 0 waits for it, as on the GPU (where the
# kernel hangs).  The CPU target emulates the threads and reports the deadlock: who waits, where.
@pytest.mark.parametrize("count,in_branch", [(256, True), (128, False)])
def test_cpu_wrong_arrival_count_is_a_deadlock_naming_the_wait(count, in_branch):
    src, first = inspect.getsourcelines(arrivals.fn)
    line = first + next(i for i, t in enumerate(src) if "T.barrier_wait(bar, 0)" in t)
    with pytest.raises(TilecraftError, match=rf"deadlock(.|\n)*threads \d+-255 wait on an mbarrier for its phase of "
                                             rf"parity 0 at {THIS}:{line} \(T.barrier_wait\(bar, 0\)\)"):
        arrivals(64, count, in_branch)(torch.randn(64))


@tilelang.jit(out_idx=[1], target="cpu")
def consumer_first(N):
    """The consumer's branch comes first in program order: it waits for data the producer's branch
    (after it) provides.  Concurrent warp groups run it: the CPU target emulates the threads."""
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            s = T.alloc_shared((N,), "float32")
            ready = T.alloc_barrier(128)
            with T.ws(1):
                T.barrier_wait(ready, 0)
                T.copy(s, Y)
            with T.ws(0):
                T.copy(X, s)
                T.barrier_arrive(ready)
    return main


def test_cpu_wait_before_its_arrival_runs_with_threads_emulated():
    x = torch.randn(64)
    kernel = consumer_first(64)
    assert "one fiber per CUDA thread" in kernel.get_kernel_source()
    torch.testing.assert_close(kernel(x), x)


@tilelang.jit(out_idx=[1], target="cpu")
def absent_group(N, threads):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            T.copy(X, Y)
            with T.ws(1):          # no such warp group when threads == 128
                for i in T.Parallel(N):
                    Y[i] = Y[i] * 2
    return main


def test_cpu_branch_of_an_absent_warp_group_does_not_run():
    x = torch.randn(32)
    torch.testing.assert_close(absent_group(32, 128)(x), x)
    torch.testing.assert_close(absent_group(32, 256)(x), x * 2)


def test_register_hints_warn_once_on_cpu():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            T.disable_warp_group_reg_alloc()
            with T.ws(0):
                T.annotate_producer_reg_dealloc()
                T.copy(X, Y)
            with T.ws(1):
                T.annotate_consumer_reg_alloc(232)
    from tilecraft.transform import lower_manual_sync_cpu as m
    m._WARNED.clear()
    with pytest.warns(UserWarning) as rec:
        k = tilelang.compile(main, out_idx=[1], target="cpu")
    texts = [str(w.message) for w in rec]
    assert sum("T.set_max_nreg" in t and "do not apply on the CPU target" in t for t in texts) == 1
    assert sum("T.disable_warp_group_reg_alloc does not apply" in t for t in texts) == 1
    x = torch.randn(64)
    torch.testing.assert_close(k(x), x)


# ---- errors at the user's line -------------------------------------------------------------------

def _kernel_with(stmt: str, tmp_path):
    """A kernel whose 6th line is `stmt`, written to a file (the parser reads the source)."""
    src = (
        "import tilecraft.language as T\n"
        "def main(X: T.Tensor((128,), 'float32'), Y: T.Tensor((128,), 'float32')):\n"
        "    with T.Kernel(1, threads=256) as bx:\n"
        "        bars = T.alloc_barrier([128, 128])\n"
        "        f = T.alloc_fragment((128,), 'float32')\n"
        f"        {stmt}\n")
    path = tmp_path / "hopper_case.py"
    path.write_text(src)
    import importlib.util
    spec = importlib.util.spec_from_file_location("hopper_case", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


@pytest.mark.parametrize("stmt,match", [
    ("T.alloc_barrier(0)", r"arrive count must be a compile-time int"),
    ("T.alloc_barrier([])", r"list of arrive counts is empty"),
    ("T.barrier_wait(bars[0], 2)", r"parity must be 0 or 1"),
    ("T.barrier_wait(bars[0])", r"parity .* is missing"),
    ("T.barrier_arrive(0)", r"barrier ids are not supported"),
    ("T.barrier_arrive(f)", r"not mbarriers"),
    ("T.set_max_nreg(100, 1)", r"multiple of 8 in 24..256"),
    ("T.set_max_nreg(240, 2)", r"is_inc must be 0"),
    ("T.ws()", r"name at least one warp group"),
    ("T.ws(-1)", r"warp group ids must be"),
])
def test_front_end_errors_name_the_line(stmt, match, tmp_path):
    fn = _kernel_with(stmt, tmp_path)
    with pytest.raises(TilecraftError, match=match) as info:
        T.prim_func(fn)
    assert info.value.span is not None and info.value.span.line == 6


@tilelang.jit(out_idx=[1])
def branch_bounded_indices(N):
    """Indices that are in range only under their branch's condition (`if i >= 4: s[i - 4]`,
    an `elif` reached only past the first condition): accepted by the bounds check, which reads
    the conditions (TileLang's producer branches index shared tiles with `tx - 256`)."""
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            lo = T.alloc_shared((4,), "float32")
            hi = T.alloc_shared((4,), "float32")
            for i in T.serial(12):
                if i < 4:
                    lo[i] = X[i] * 2
                elif i >= 4 and i < 8:
                    hi[i - 4] = X[i] + 1
                else:
                    Y[i] = lo[i - 8] + hi[i - 8]
            for i in T.serial(8):
                Y[i] = X[i]
    return main


def test_indices_bounded_by_their_branch(build, device):
    x = torch.randn(12)
    y = build(branch_bounded_indices, 12)(x.to(device)).cpu()
    ref = x.clone()
    ref[8:] = x[0:4] * 2 + x[4:8] + 1
    torch.testing.assert_close(y, ref)

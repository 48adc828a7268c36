"""`if`/`elif` chains on the thread index whose later branches are reached by threads that are not
contiguous (issue 27).

TileLang's Blackwell FlashAttention (flash_attention_sm100/mha_fwd_bshd.py, the "wasp" variant)
specializes warps with `if 128 <= tid < 160: DMA  elif 160 <= tid < 192: MMA  elif tid < 128:
softmax`: after the first condition, threads [0, 128) and [160, 256) reach the `elif`s, each of
which bounds one contiguous range of them.  Each branch's tile ops are spread over the branch's own
threads.  tilecraft refused the chain (it wanted the threads left after each condition contiguous);
now each branch is a branch of its threads, and only a branch whose own threads are not one
contiguous range of whole warps (an `else` of [0, 128) and [160, 256), say) is refused, with why.

The warp-specialized form with a tcgen05 gemm and its commit inside a branch of one warp runs in the
CPU target's thread-level mode (its waits need the branches running at once): the gemm is spread
over the warp's 32 threads, the commit is one arrival once they are all done.  Checked against
torch; the sm_80 / sm_90a sources of the plain chain are compile-checked (NVRTC), unverified on a
GPU."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

ARCHS = ["sm_80", "sm_90a"]


def chain(n=256, last="elif"):
    """Three branches: threads [128, 160) double X into Y, [160, 192) add 1 through a shared tile,
    [0, 128) (an `elif`, or an `else` of the non-contiguous rest) square through a fragment."""
    @T.prim_func
    def main(X: T.Tensor((3, n), "float32"), Y: T.Tensor((3, n), "float32")):
        with T.Kernel(1, threads=256) as bx:
            tid = T.get_thread_binding()
            s = T.alloc_shared((n,), "float32")
            if tid >= 128 and tid < 160:
                for i in T.Parallel(n):
                    Y[0, i] = X[0, i] * 2
            elif tid >= 160 and tid < 192:
                T.copy(X[1, :], s)
                for i in T.Parallel(n):
                    s[i] = s[i] + 1
                T.copy(s, Y[1, :])
            elif tid < 128 if last == "elif" else tid < 256:  # the last branch line
                f = T.alloc_fragment((n,), "float32")
                T.copy(X[2, :], f)
                for i in T.Parallel(n):
                    f[i] = f[i] * f[i]
                T.copy(f, Y[2, :])
    return main


def chain_with_else(n=256):
    @T.prim_func
    def main(X: T.Tensor((2, n), "float32"), Y: T.Tensor((2, n), "float32")):
        with T.Kernel(1, threads=256) as bx:
            tid = T.get_thread_binding()
            if tid >= 128 and tid < 160:  # the if line
                for i in T.Parallel(n):
                    Y[0, i] = X[0, i] * 2
            else:
                for i in T.Parallel(n):
                    Y[1, i] = X[1, i] + 1
    return main


def check_chain(kernel, device="cpu", n=256):
    x = torch.randn(3, n)
    y = torch.full((3, n), float("nan"))
    args = [x.to(device), y.to(device)]
    kernel(*args)
    want = torch.stack([x[0] * 2, x[1] + 1, x[2] * x[2]])
    torch.testing.assert_close(args[1].cpu(), want)


def test_elif_chain_over_non_contiguous_threads_on_cpu():
    check_chain(tilelang.compile(chain(), target="cpu"))


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_elif_chain_branches_run_on_their_own_threads(arch):
    src = tilelang.compile(chain(), target={"kind": "cuda", "arch": arch}).get_kernel_source()
    for lo, hi in ((128, 160), (160, 192), (0, 128)):
        assert f"if (tc_tid >= {lo} && tc_tid < {hi}) {{" in src, src
    mma = src[src.index("if (tc_tid >= 160 && tc_tid < 192) {"):src.index("if (tc_tid >= 0 && tc_tid < 128) {")]
    assert "(tc_tid - 160)" in mma and "__syncthreads" not in mma, mma


def test_an_elif_of_two_ranges_is_refused_with_why():
    with pytest.raises(TilecraftError, match=r"threads \[0, 128\) and \[192, 256\) are not one contiguous") as e:
        tilelang.compile(chain(last="wide"), target="cpu")
    assert "test_thread_range_chains.py" in str(e.value), str(e.value)


@pytest.mark.parametrize("target", ["cpu", {"kind": "cuda", "arch": "sm_80"}])
def test_an_else_of_two_ranges_is_refused_with_why(target):
    with pytest.raises(TilecraftError, match=r"its else runs on threads \[0, 128\) and \[160, 256\), not one "
                                             r"contiguous range") as e:
        tilelang.compile(chain_with_else(), target=target)
    assert "the if line" in str(e.value), str(e.value)


def wasp_gemm(m=128, n=64, k=64, bk=32):
    """The Blackwell FlashAttention's roles on a gemm: the MMA warp [160, 192) waits for the DMA
    warp [128, 160) (which comes after it in the program: the branches must run at once), issues
    one tcgen05 gemm per K step into tensor memory and commits; warp group 0 waits for the commit
    and stores the tile."""
    steps = k // bk

    @T.prim_func
    def main(A: T.Tensor((m, k), "bfloat16"), B: T.Tensor((n, k), "bfloat16"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=256) as bx:
            A_s = T.alloc_shared((steps, m, bk), "bfloat16")
            B_s = T.alloc_shared((steps, n, bk), "bfloat16")
            C_tmem = T.alloc_tmem([m, n], "float32")
            full = T.alloc_barrier([32] * steps)
            done = T.alloc_barrier([1])
            tid = T.get_thread_binding()
            if tid >= 160 and tid < 192:
                T.set_max_nreg(40, 0)   # dropped on the CPU target (register budgets are sm_90a's)
                for s in T.serial(steps):
                    T.mbarrier_wait_parity(full[s], 0)
                    T.tcgen05_gemm(A_s[s, :, :], B_s[s, :, :], C_tmem, transpose_B=True, clear_accum=s == 0)
                T.tcgen05_mma_arrive(done[0])
            elif tid >= 128 and tid < 160:
                for s in T.serial(steps):
                    T.copy(A[0, s * bk], A_s[s, :, :])
                    T.copy(B[0, s * bk], B_s[s, :, :])
                    T.mbarrier_arrive(full[s])
            elif tid < 128:
                c = T.alloc_fragment((m, n), "float32")
                T.mbarrier_wait_parity(done[0], 0)
                T.copy(C_tmem, c)
                T.copy(c, C)
    return main


def test_tcgen05_gemm_in_a_warp_branch_runs_with_threads():
    kernel = tilelang.compile(wasp_gemm(), target="cpu")
    assert "tc::simt" in kernel.get_kernel_source()   # the thread-level mode: the branches run at once
    a, b = torch.randn(128, 64).bfloat16(), torch.randn(64, 64).bfloat16()
    c = torch.full((128, 64), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-4, atol=1e-4)


def budget_in_a_warp_branch():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tid = T.get_thread_binding()
            if tid < 32:
                T.set_max_nreg(40, 0)  # the budget line
                for i in T.Parallel(64):
                    Y[i] = X[i] + 1
    return main


@pytest.mark.cuda_compile
def test_a_register_budget_in_a_warp_branch():
    """setmaxnreg moves a warp group's registers: refused in a branch of one warp on sm_90a, where
    it would be emitted; dropped (with a warning) on sm_80 as everywhere it does not apply."""
    with pytest.raises(TilecraftError, match=r"T.set_max_nreg inside a branch on threads \[0, 32\)") as e:
        tilelang.compile(budget_in_a_warp_branch(), target={"kind": "cuda", "arch": "sm_90a"})
    assert "the budget line" in str(e.value)
    src = tilelang.compile(budget_in_a_warp_branch(), target={"kind": "cuda", "arch": "sm_80"}).get_kernel_source()
    assert "if (tc_tid >= 0 && tc_tid < 32) {" in src and "setmaxnreg" not in src, src


def vote_guarded_tile_op():
    """aws/flash_attention.py's warp vote: each warp skips a tile op when all its rows agree."""
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tid = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            f = T.alloc_fragment((128, 16), "float32")
            T.copy(X, s)
            T.fill(f, 1)
            vote = T.any_sync(s[tid] < 1.0)
            if vote != 0:  # the vote line
                for i, j in T.Parallel(128, 16):
                    f[i, j] *= s[i]
            T.copy(f, Y)
    return main


def test_a_tile_op_under_a_per_thread_condition_is_refused_with_why():
    with pytest.raises(TilecraftError, match=r"its condition is a value that differs between threads") as e:
        tilelang.compile(vote_guarded_tile_op(), target="cpu")
    assert "the vote line" in str(e.value), str(e.value)


def commit_under(cond):
    """A block-wide tcgen05 gemm whose commit one thread makes (`if tid == 0:`), as TileLang
    programs elect the thread that issues the MMA's completion."""
    @T.prim_func
    def main(A: T.Tensor((128, 32), "bfloat16"), B: T.Tensor((64, 32), "bfloat16"), C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((128, 32), "bfloat16")
            B_s = T.alloc_shared((64, 32), "bfloat16")
            C_tmem = T.alloc_tmem([128, 64], "float32")
            done = T.alloc_barrier([1])
            tid = T.get_thread_binding()
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.tcgen05_gemm(A_s, B_s, C_tmem, transpose_B=True, clear_accum=True)
            if cond(tid):
                T.tcgen05_mma_arrive(done[0])  # the commit line
            T.mbarrier_wait_parity(done[0], 0)
            c = T.alloc_fragment((128, 64), "float32")
            T.copy(C_tmem, c)
            T.copy(c, C)
    return main


def test_a_commit_by_one_thread_runs_with_threads():
    kernel = tilelang.compile(commit_under(lambda tid: tid == 0), target="cpu")
    assert "tc::simt" in kernel.get_kernel_source()
    a, b = torch.randn(128, 32).bfloat16(), torch.randn(64, 32).bfloat16()
    c = torch.full((128, 64), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-4, atol=1e-4)


def test_a_commit_under_a_condition_of_several_threads_is_refused():
    with pytest.raises(TilecraftError, match=r"a tcgen05 commit .* under an `if` on the thread index that does not "
                                             r"select one thread") as e:
        tilelang.compile(commit_under(lambda tid: tid % 2 == 0), target="cpu")
    assert "the commit line" in str(e.value), str(e.value)

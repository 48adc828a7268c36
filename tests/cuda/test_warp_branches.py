"""An `if` on the thread index around tile work, bounded on whole warps (not whole warp groups).

TileLang's mHC pre-block example (deepseek_mhc/example_mhc_pre.py) runs `if
T.get_thread_binding() < 32:` with T.Parallel loops and reductions in one branch and a pipelined
copy into shared memory in the other, in a block of 96 threads.  tilecraft made branches of whole
warp groups only; this `if` stayed an ordinary one, its tile ops were lowered for all 96 threads,
and the shares of the threads that take the other branch were never done (the example's wrong
answer on the H200, session 6).  Now such a branch is a branch of whole warps (`WarpGroupScope`
with `lanes`): its tile ops are spread over its own threads, its barriers are named barriers of
those threads.  Bounds that are not on warps, and gemms or register budgets inside such a branch,
are errors at the user's line.

CPU reference (the branches run in program order) against torch; the sm_80 / sm_90a sources;
GPU runs in tests/gpu/test_warp_branches_gpu.py."""
from __future__ import annotations

import re

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError

ARCHS = ["sm_80", "sm_90a"]


def split_at_warp(split=32, threads=96, n=256, hc=4):
    """The mHC pre-block's shape: threads [0, split) turn a 4x4 block of mixes into a doubly
    normalised matrix (reductions along both axes); the others compute Y = sum_h w[h] * X[h, :]
    through a shared tile, one column block at a time."""
    @T.prim_func
    def main(X: T.Tensor((hc, 2 * n), "float32"), W: T.Tensor((hc + hc * hc,), "float32"),
             Y: T.Tensor((2 * n,), "float32"), Comb: T.Tensor((hc, hc), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            w_s = T.alloc_shared((hc + hc * hc,), "float32")
            T.copy(W, w_s)
            if T.get_thread_binding() < split:  # the branch line
                cm = T.alloc_fragment((hc, hc), "float32")
                rs = T.alloc_fragment((hc,), "float32")
                cs = T.alloc_fragment((hc,), "float32")
                for j, k in T.Parallel(hc, hc):
                    cm[j, k] = T.exp(w_s[hc + j * hc + k])
                T.reduce_sum(cm, rs, dim=1)
                for j, k in T.Parallel(hc, hc):
                    cm[j, k] = cm[j, k] / rs[j]
                T.reduce_sum(cm, cs, dim=0)
                for j, k in T.Parallel(hc, hc):
                    cm[j, k] = cm[j, k] / cs[k]
                T.copy(cm, Comb)
            else:
                pre = T.alloc_shared((hc,), "float32")
                for j in T.Parallel(hc):
                    pre[j] = T.sigmoid(w_s[j])
                for blk in T.serial(2):
                    xs = T.alloc_shared((hc, n), "float32")
                    T.copy(X[0, blk * n], xs)
                    acc = T.alloc_fragment((n,), "float32")
                    T.clear(acc)
                    for h in T.serial(hc):
                        p = pre[h]
                        for i in T.Parallel(n):
                            acc[i] += p * xs[h, i]
                    T.copy(acc, Y[blk * n])
    return main


def check_split(kernel, device="cpu", n=256, hc=4):
    x, w = torch.randn(hc, 2 * n), torch.randn(hc + hc * hc)
    y = torch.full((2 * n,), float("nan"))
    comb = torch.full((hc, hc), float("nan"))
    args = [t.to(device) for t in (x, w, y, comb)]
    kernel(*args)
    cm = w[hc:].view(hc, hc).exp()
    cm = cm / cm.sum(1, keepdim=True)
    cm = cm / cm.sum(0, keepdim=True)
    torch.testing.assert_close(args[3].cpu(), cm, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(args[2].cpu(), (torch.sigmoid(w[:hc])[:, None] * x).sum(0), rtol=1e-5, atol=1e-5)


def test_warp_branches_on_cpu():
    check_split(tilelang.compile(split_at_warp(), target="cpu"))


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_warp_branches_run_on_their_own_threads(arch):
    src = tilelang.compile(split_at_warp(), target={"kind": "cuda", "arch": arch}).get_kernel_source()
    assert "if (tc_tid >= 0 && tc_tid < 32) {" in src and "if (tc_tid >= 32 && tc_tid < 96) {" in src, src
    other = src[src.index("if (tc_tid >= 32 && tc_tid < 96) {"):]
    # the 64 threads of the second branch index from their first, and wait for each other only
    assert "(tc_tid - 32)" in other and "__syncthreads" not in other, other
    assert re.search(r"named_barrier_sync<1[0-5], 64>", other), other


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_bounds_off_warps_are_refused_at_the_if(arch):
    with pytest.raises(TilecraftError, match=r"threads \[0, 16\) of the block's 96") as e:
        tilelang.compile(split_at_warp(split=16), target={"kind": "cuda", "arch": arch})
    assert "test_warp_branches.py" in str(e.value) and "the branch line" in str(e.value), str(e.value)


def test_bounds_off_warps_are_refused_on_cpu_too():
    with pytest.raises(TilecraftError, match=r"threads \[0, 16\)"):
        tilelang.compile(split_at_warp(split=16), target="cpu")


def gemm_in_a_warp_branch():
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=96) as bx:
            a_s = T.alloc_shared((16, 16), "float16")
            T.copy(A, a_s)
            if T.get_thread_binding() >= 32:
                c = T.alloc_fragment((16, 16), "float32")
                T.clear(c)
                T.gemm(a_s, a_s, c)  # the gemm line
                T.copy(c, C)
    return main


@pytest.mark.cuda_compile
def test_a_gemm_in_a_warp_branch_is_refused():
    with pytest.raises(TilecraftError, match=r"T.gemm inside a branch on threads \[32, 96\)") as e:
        tilelang.compile(gemm_in_a_warp_branch(), target={"kind": "cuda", "arch": "sm_80"})
    assert "the gemm line" in str(e.value)


def per_thread_work(threads=128):
    @T.prim_func
    def main(X: T.Tensor((threads,), "float32"), Out: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((threads,), "float32")
            T.copy(X, s)
            if tx == 0:
                T.atomic_add(Out[0], s[5])
            if tx < 16:
                Out[1] = s[tx]
    return main


def whole_warp_groups(threads=256):
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            if tx < 128:
                T.copy(X, s)
                for i in T.Parallel(128):
                    Y[i] = s[i] * 2.0
    return main


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_per_thread_work_and_warp_group_branches_are_unchanged(arch):
    target = {"kind": "cuda", "arch": arch}
    assert "atomic" in tilelang.compile(per_thread_work(), target=target).get_kernel_source()
    src = tilelang.compile(whole_warp_groups(), target=target).get_kernel_source()
    assert "if (tc_tid >= 0 && tc_tid < 128) {  // T.ws(0,)" in src, src


def private_tiles():
    """Each branch stages its own input through a shared tile of its own."""
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            if T.get_thread_binding() < 64:
                a_s = T.alloc_shared((64,), "float32")
                T.copy(A, a_s)
                for i in T.Parallel(64):
                    C[i] = a_s[63 - i]
            else:
                b_s = T.alloc_shared((64,), "float32")
                T.copy(B, b_s)
                for i in T.Parallel(64):
                    C[64 + i] = b_s[63 - i] * 2.0
    return main


def test_private_tiles_on_cpu():
    a, b = torch.randn(64), torch.randn(64)
    c = tilelang.compile(private_tiles(), out_idx=[-1], target="cpu")(a, b)
    torch.testing.assert_close(c, torch.cat([a.flip(0), b.flip(0) * 2]))


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_branches_running_together_do_not_share_shared_memory(arch):
    """The two branches run at the same time: their tiles must not reuse each other's bytes
    (plan_shared_memory took consecutive branches for consecutive lifetimes)."""
    src = tilelang.compile(private_tiles(), out_idx=[-1], target={"kind": "cuda", "arch": arch}).get_kernel_source()
    offsets = {n: int(o) for n, o in re.findall(r"\* __restrict__ (\w_s) = reinterpret_cast<float\*>\(tc_smem \+ (\d+)\)", src)}
    assert set(offsets) == {"a_s", "b_s"}, src
    assert abs(offsets["a_s"] - offsets["b_s"]) >= 256, offsets

"""`T.gemm` on a column slice of a wider shared tile (`Q_shared[:, 512:576]`, TileLang's
DeepSeek sparse-MLA kernels): the tensor-core gemm must address the slice's rows with the parent
tile's stride.  It used the slice's own width (a silent wrong answer on the GPU only: the CPU
target indexes regions directly).  The CPU target runs the kernels against torch here; sm_80 /
sm_90a sources must call tc::gemm_ss_ld / gemm_rs_ld with the parent's stride and compile.  The GPU
run is tests/gpu/test_gemm_column_slice_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


def slice_gemm(M, N, W, k1, threads=128, gather=False, c0=0):
    """O = Q[:, c0:k1] @ KV[idx, c0:k1]^T + Q[:, k1:] @ KV[idx, k1:]^T, both gemms on column
    slices of one (M, W) shared tile of Q; KV gathered by rows into two tiles when `gather`."""
    @T.prim_func
    def main(Q: T.Tensor((M, W), "bfloat16"), KV: T.Tensor((N, W), "bfloat16"), Idx: T.Tensor((N,), "int32"),
             O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            Qs = T.alloc_shared((M, W), "bfloat16")
            Ks = T.alloc_shared((N, k1 - c0), "bfloat16")
            Kt = T.alloc_shared((N, W - k1), "bfloat16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(Q[:, :k1], Qs[:, :k1])
            T.copy(Q[:, k1:], Qs[:, k1:])
            if gather:
                for i, j in T.Parallel(N, k1 - c0):
                    Ks[i, j] = KV[Idx[i], c0 + j]
                for i, j in T.Parallel(N, W - k1):
                    Kt[i, j] = KV[Idx[i], k1 + j]
            else:
                T.copy(KV[:, c0:k1], Ks)
                T.copy(KV[:, k1:], Kt)
            T.fill(acc, 0)
            T.gemm(Qs[:, c0:k1], Ks, acc, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            T.gemm(Qs[:, k1:], Kt, acc, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, O)
    return main


def slice_b_gemm(M, N, K, W, n0, threads=128):
    """O = P @ V[:, n0:n0+N] with P an (M, K) fragment and B a column slice of a (K, W) shared tile."""
    @T.prim_func
    def main(P: T.Tensor((M, K), "bfloat16"), V: T.Tensor((K, W), "bfloat16"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            Ps = T.alloc_shared((M, K), "bfloat16")
            Vs = T.alloc_shared((K, W), "bfloat16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(P, Ps)
            T.copy(V, Vs)
            T.clear(acc)
            T.gemm(Ps, Vs[:, n0:n0 + N], acc)
            T.copy(acc, O)
    return main


def loop_slice_gemm(M, N, W, step, threads=128, unroll=True):
    """O = Q @ KV^T over W as W // step column slices `[:, j * step:(j + 1) * step]` of both shared
    tiles, j a loop variable (TileLang's FlashMLA kernels split K this way): the slice starts are
    not constants, but multiples of `step`."""
    @T.prim_func
    def main(Q: T.Tensor((M, W), "bfloat16"), KV: T.Tensor((N, W), "bfloat16"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            Qs = T.alloc_shared((M, W), "bfloat16")
            Ks = T.alloc_shared((N, W), "bfloat16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(Q, Qs)
            T.copy(KV, Ks)
            T.clear(acc)
            for j in (T.unroll(W // step) if unroll else T.serial(W // step)):
                T.gemm(Qs[:, j * step:(j + 1) * step], Ks[:, j * step:(j + 1) * step], acc, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, O)
    return main


def check_loop(kernel_of, M, N, W, step, device, unroll=True):
    g = torch.Generator().manual_seed(M + N + W + step)
    Q = torch.randn(M, W, generator=g).to(torch.bfloat16).to(device)
    KV = torch.randn(N, W, generator=g).to(torch.bfloat16).to(device)
    O = torch.zeros(M, N, dtype=torch.float32, device=device)
    kernel_of(loop_slice_gemm(M, N, W, step, unroll=unroll))(Q, KV, O)
    torch.testing.assert_close(O, Q.float() @ KV.float().T, rtol=1e-3, atol=1e-3)


LOOP_CASES = [dict(M=64, N=64, W=256, step=64), dict(M=64, N=64, W=256, step=64, unroll=False),
              dict(M=64, N=32, W=192, step=48)]


def check(kernel_of, case, device):
    M, N, W, k1, c0, gather = case["M"], case["N"], case["W"], case["k1"], case.get("c0", 0), case.get("gather", False)
    g = torch.Generator().manual_seed(M + N + W + k1)
    Q = torch.randn(M, W, generator=g).to(torch.bfloat16).to(device)
    KV = torch.randn(N, W, generator=g).to(torch.bfloat16).to(device)
    Idx = torch.randperm(N, generator=g).to(torch.int32).to(device)
    O = torch.zeros(M, N, dtype=torch.float32, device=device)
    kernel_of(slice_gemm(M, N, W, k1, case.get("threads", 128), gather, c0))(Q, KV, Idx, O)
    Kg = KV[Idx.long()] if gather else KV
    ref = Q[:, c0:k1].float() @ Kg[:, c0:k1].float().T + Q[:, k1:].float() @ Kg[:, k1:].float().T
    torch.testing.assert_close(O, ref, rtol=1e-3, atol=1e-3)


def check_b(kernel_of, M, N, K, W, n0, device):
    g = torch.Generator().manual_seed(M + N + K + W + n0)
    P = torch.randn(M, K, generator=g).to(torch.bfloat16).to(device)
    V = torch.randn(K, W, generator=g).to(torch.bfloat16).to(device)
    O = torch.zeros(M, N, dtype=torch.float32, device=device)
    kernel_of(slice_b_gemm(M, N, K, W, n0))(P, V, O)
    torch.testing.assert_close(O, P.float() @ V[:, n0:n0 + N].float(), rtol=1e-3, atol=1e-3)


CASES = [dict(M=64, N=64, W=576, k1=512), dict(M=64, N=64, W=576, k1=512, threads=256, gather=True),
         dict(M=64, N=64, W=192, k1=128, threads=256), dict(M=64, N=32, W=256, k1=192, c0=64)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_column_slices_on_cpu(case):
    check(lambda f: tilelang.compile(f, target="cpu"), case, "cpu")


def test_column_slice_b_on_cpu():
    check_b(lambda f: tilelang.compile(f, target="cpu"), 64, 64, 64, 256, 128, "cpu")


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_column_slices_use_the_parent_stride(arch):
    src = tilelang.compile(slice_gemm(64, 64, 576, 512, 256), target={"kind": "cuda", "arch": arch}).get_kernel_source()
    # Q_shared's rows are 576 wide: both slices (K=512 at column 0, K=64 at column 512) say so
    assert "tc::gemm_ss_ld<64, 64, 512," in src and "tc::bfloat16_t, 576, 512>" in src
    assert "tc::gemm_ss_ld<64, 64, 64," in src and "tc::bfloat16_t, 576, 64>" in src
    src = tilelang.compile(slice_b_gemm(64, 64, 64, 256, 128), target={"kind": "cuda", "arch": arch}).get_kernel_source()
    assert "tc::gemm_ss_ld<64, 64, 64," in src and "tc::bfloat16_t, 64, 256>" in src


@pytest.mark.cuda_compile
def test_whole_tiles_keep_gemm_ss():
    """Whole-width operands (every program before this fix) still call tc::gemm_ss."""
    src = tilelang.compile(slice_gemm(64, 64, 128, 64, 128), target={"kind": "cuda", "arch": "sm_80"}).get_kernel_source()
    assert "gemm_ss_ld<64, 64, 64," in src  # Q's slices are half its width
    src = tilelang.compile(slice_b_gemm(64, 64, 64, 64, 0), target={"kind": "cuda", "arch": "sm_80"}).get_kernel_source()
    assert "tc::gemm_ss<" in src and "gemm_ss_ld" not in src


@pytest.mark.cuda_compile
def test_unaligned_slice_takes_the_scalar_path():
    """A slice starting off a 128-byte boundary cannot be read with ldmatrix + the swizzle: the
    gemm runs as per-register dot products, and the plan says so; the result stays right (CPU)."""
    k = tilelang.compile(slice_gemm(64, 32, 96, 80, 128, c0=16), target={"kind": "cuda", "arch": "sm_80"})
    assert "gemm_ss" not in k.get_kernel_source()
    assert "scalar dot products" in str(k.get_plan())
    check(lambda f: tilelang.compile(f, target="cpu"), dict(M=64, N=32, W=96, k1=80, c0=16), "cpu")


@pytest.mark.parametrize("case", LOOP_CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_loop_variable_slices_on_cpu(case):
    check_loop(lambda f: tilelang.compile(f, target="cpu"), device="cpu", **case)


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("unroll", [True, False])
def test_loop_variable_slices_on_a_128_byte_boundary_use_the_tensor_cores(arch, unroll):
    """`Qs[:, j * 64:(j + 1) * 64]` starts at j * 128 bytes for every j: ldmatrix + the swizzle
    line up, so the gemm takes tc::gemm_ss_ld with the parent's stride (it took per-register dot
    products when only constant starts were recognised: FlashMLA's K split then compiled for
    minutes with NVRTC)."""
    k = tilelang.compile(loop_slice_gemm(64, 64, 256, 64, unroll=unroll), target={"kind": "cuda", "arch": arch})
    src = k.get_kernel_source()
    assert "tc::gemm_ss_ld<64, 64, 64," in src and "tc::bfloat16_t, 256, 256>" in src
    assert "scalar dot products" not in str(k.get_plan())


@pytest.mark.cuda_compile
def test_loop_variable_slices_off_the_boundary_take_the_scalar_path():
    """j * 48 bf16 elements is 96 bytes apart: not provably 128-byte aligned, so per-register dot
    products (the plan says so); the result stays right (CPU run above)."""
    k = tilelang.compile(loop_slice_gemm(64, 32, 192, 48), target={"kind": "cuda", "arch": "sm_80"})
    assert "gemm_ss" not in k.get_kernel_source()
    assert "scalar dot products" in str(k.get_plan())

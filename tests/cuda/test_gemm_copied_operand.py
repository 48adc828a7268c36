"""A gemm whose fragment operand is an unchanged copy of a shared tile reads that tile
(transform/stage_gemm_operands.py): TileLang's attention idiom `T.copy(acc_s, S_shared);
T.copy(S_shared, acc_s_cast); T.gemm(acc_s_cast, V_shared, acc_o)` with warps along N, where the
fragment cannot be A in registers.  Staging it would duplicate S_shared's bytes; TileLang's
two-stage MLA decode (64x512 tiles) fits sm_90a's shared memory only without the duplicate.
The CPU target runs the kernel against torch; sm_80 / sm_90a sources must not stage the fragment and
must compile.  The GPU run is tests/gpu/test_gemm_copied_operand_gpu.py."""
from __future__ import annotations

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T


def copied_operand_attention(M=64, N=64, D=64, S=256, threads=256, num_stages=2, write_between=False):
    """O = softmax-free attention: for each KV block, P = (Q K^T) cast to fp16 through shared memory,
    O += P V.  `write_between`: the shared tile is scaled after the fragment's copy (the gemm must then
    read the fragment's values, the pre-scaling ones)."""
    @T.prim_func
    def main(Q: T.Tensor((M, D), "float16"), K: T.Tensor((S, D), "float16"), V: T.Tensor((S, D), "float16"),
             O: T.Tensor((M, D), "float32")):
        with T.Kernel(1, threads=threads) as _:
            Q_s = T.alloc_shared((M, D), "float16")
            K_s = T.alloc_shared((N, D), "float16")
            V_s = T.alloc_shared((N, D), "float16")
            S_s = T.alloc_shared((M, N), "float16")
            acc_s = T.alloc_fragment((M, N), "float32")
            acc_s_cast = T.alloc_fragment((M, N), "float16")
            acc_o = T.alloc_fragment((M, D), "float32")
            T.copy(Q, Q_s)
            T.clear(acc_o)
            for k in T.Pipelined(S // N, num_stages=num_stages):
                T.copy(K[k * N:(k + 1) * N, :], K_s)
                T.copy(V[k * N:(k + 1) * N, :], V_s)
                T.clear(acc_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                for i, j in T.Parallel(M, N):
                    acc_s[i, j] = acc_s[i, j] * 0.125
                T.copy(acc_s, S_s)
                T.copy(S_s, acc_s_cast)
                if write_between:
                    for i, j in T.Parallel(M, N):
                        S_s[i, j] = S_s[i, j] * 2
                T.gemm(acc_s_cast, V_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            T.copy(acc_o, O)
    return main


def reference(q, k, v, n=64):
    out = torch.zeros(q.shape[0], v.shape[1], dtype=torch.float32, device=q.device)
    for b in range(0, k.shape[0], n):
        p = ((q.float() @ k[b:b + n].float().T) * 0.125).half()
        out += p.float() @ v[b:b + n].float()
    return out


def check(compile_fn, device, **kw):
    kern = compile_fn(copied_operand_attention(**kw))
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(shape, generator=g).half().to(device) for shape in ((64, 64), (256, 64), (256, 64)))
    o = torch.empty(64, 64, dtype=torch.float32, device=device)
    kern(q, k, v, o)
    torch.testing.assert_close(o.cpu(), reference(q, k, v).cpu(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("write_between", [False, True])
def test_copied_operand_on_the_cpu_target(write_between):
    check(lambda f: tilelang.compile(f, target="cpu"), "cpu", write_between=write_between)


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("write_between", [False, True])
def test_copied_operand_reads_the_shared_tile_and_compiles(arch, write_between):
    src = tilelang.compile(copied_operand_attention(write_between=write_between),
                           target={"kind": "cuda", "arch": arch}).get_kernel_source()
    # the staged copy of the fragment exists exactly when the shared tile changed after the copy
    assert ("acc_s_cast_smem" in src) == write_between

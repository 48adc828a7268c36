"""Barriers inside an `if` whose condition is the same in every thread of the block.

TileLang's persistent kernels (deepseek_mla/example_mla_decode_persistent.py) put a whole tile
of work under `if tile < n:` inside a grid-stride loop.  insert_syncs took an `if` as one
statement, so the copies, gemms and cross-warp reductions inside it ran with no barrier between
a shared-memory write and the reads of other threads (wrong answers on the H200, session 6).  Now
a block-uniform `if` gets its barriers inside (ir/uniformity.py says which conditions are); an
`if` on a per-thread value keeps them outside, where every thread passes.

CPU reference against torch here; sm_80 and sm_90a sources checked for the barriers; the GPU runs
are tests/gpu/test_uniform_if_sync_gpu.py."""
from __future__ import annotations

import re

import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.ir import If, Kernel, collect
from tilecraft.ir.uniformity import Uniformity

ARCHS = ["sm_80", "sm_90a"]


def guarded_tiles(n_tiles, blocks, M=64, N=64, K=64, threads=256):
    """Out[t] = rowmax-normalised A[t] @ B[t]^T for each tile t, a persistent grid of `blocks`
    blocks striding over the tiles; the FullCol gemm puts every row in all 8 warps, so the row
    max crosses warps through shared memory."""
    waves = -(-n_tiles // blocks)

    @T.prim_func
    def main(A: T.Tensor((n_tiles, M, K), "float16"), B: T.Tensor((n_tiles, N, K), "float16"),
             Out: T.Tensor((n_tiles, M, N), "float32")):
        with T.Kernel(blocks, threads=threads) as bid:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((N, K), "float16")
            S = T.alloc_fragment((M, N), "float32")
            m = T.alloc_fragment((M,), "float32")
            for w in T.serial(waves):
                t = w * blocks + bid
                if t < n_tiles:
                    T.copy(A[t, 0, 0], A_s)
                    T.copy(B[t, 0, 0], B_s)
                    T.clear(S)
                    T.gemm(A_s, B_s, S, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                    T.reduce_max(S, m, dim=1)
                    for i, j in T.Parallel(M, N):
                        S[i, j] = S[i, j] - m[i]
                    T.copy(S, Out[t, 0, 0])
    return main


def check_guarded(kernel, n_tiles, device="cpu", M=64, N=64, K=64):
    a = torch.randn(n_tiles, M, K).half()
    b = torch.randn(n_tiles, N, K).half()
    out = torch.full((n_tiles, M, N), float("nan"))
    out = out.to(device)
    kernel(a.to(device), b.to(device), out)
    s = a.float() @ b.float().transpose(1, 2)
    ref = s - s.amax(dim=2, keepdim=True)
    torch.testing.assert_close(out.cpu(), ref, atol=2e-3, rtol=2e-3)


def mla_persistent(batch, heads, seqlen_kv, dim, pe_dim, block_N, block_H, blocks, threads=256):
    """TileLang's persistent MLA decode, first kernel (one split): a whole attention tile under
    `if bid < batch:` in a grid-stride loop, with the row vectors read through covering layouts."""
    scale = (1.0 / (dim + pe_dim)) ** 0.5 * 1.44269504
    dtype, accum = "float16", "float32"
    groups = heads // block_H
    waves = -(-batch * groups // blocks)

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype), Q_pe: T.Tensor([batch, heads, pe_dim], dtype),
             KV: T.Tensor([batch, seqlen_kv, dim], dtype), K_pe: T.Tensor([batch, seqlen_kv, pe_dim], dtype),
             Output: T.Tensor([batch, heads, dim], dtype)):
        with T.Kernel(blocks, threads=threads) as block_id:
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            S_shared = T.alloc_shared([block_H, block_N], dtype)
            Q_pe_shared = T.alloc_shared([block_H, pe_dim], dtype)
            KV_shared = T.alloc_shared([block_N, dim], dtype)
            K_pe_shared = T.alloc_shared([block_N, pe_dim], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_H, block_N], dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum)
            m = T.alloc_fragment([block_H], accum)
            m_prev = T.alloc_fragment([block_H], accum)
            sc = T.alloc_fragment([block_H], accum)
            ssum = T.alloc_fragment([block_H], accum)
            logsum = T.alloc_fragment([block_H], accum)
            for w in T.serial(waves):
                tile = w * blocks + block_id
                bid = tile // groups
                hid = tile % groups
                if bid < batch:
                    T.copy(Q[bid, hid * block_H:(hid + 1) * block_H, :], Q_shared)
                    T.copy(Q_pe[bid, hid * block_H:(hid + 1) * block_H, :], Q_pe_shared)
                    T.fill(acc_o, 0)
                    T.fill(logsum, 0)
                    T.fill(m, -T.infinity(accum))
                    for k in T.Pipelined(T.ceildiv(seqlen_kv, block_N), num_stages=2):
                        T.copy(KV[bid, k * block_N:(k + 1) * block_N, :], KV_shared)
                        T.copy(K_pe[bid, k * block_N:(k + 1) * block_N, :], K_pe_shared)
                        T.clear(acc_s)
                        T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                        T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                        T.copy(m, m_prev)
                        T.fill(m, -T.infinity(accum))
                        T.reduce_max(acc_s, m, dim=1, clear=False)
                        for i in T.Parallel(block_H):
                            m[i] = T.max(m[i], m_prev[i])
                        for i in T.Parallel(block_H):
                            sc[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                        for i, j in T.Parallel(block_H, block_N):
                            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                        T.reduce_sum(acc_s, ssum, dim=1)
                        T.copy(acc_s, S_shared)
                        T.copy(S_shared, acc_s_cast)
                        for i in T.Parallel(block_H):
                            logsum[i] = logsum[i] * sc[i] + ssum[i]
                        for i, j in T.Parallel(block_H, dim):
                            acc_o[i, j] *= sc[i]
                        T.gemm(acc_s_cast, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)
                    for i, j in T.Parallel(block_H, dim):
                        acc_o[i, j] /= logsum[i]
                    T.copy(acc_o, Output[bid, hid * block_H:(hid + 1) * block_H, :])
    return main


def check_mla(kernel, batch, heads, seqlen_kv, dim, pe_dim, device="cpu"):
    q, q_pe = torch.randn(batch, heads, dim).half(), torch.randn(batch, heads, pe_dim).half()
    kv, k_pe = torch.randn(batch, seqlen_kv, dim).half(), torch.randn(batch, seqlen_kv, pe_dim).half()
    out = kernel(*(x.to(device) for x in (q, q_pe, kv, k_pe))).cpu().float()
    s = (q.float() @ kv.float().transpose(1, 2) + q_pe.float() @ k_pe.float().transpose(1, 2)) / (dim + pe_dim) ** 0.5
    torch.testing.assert_close(out, torch.softmax(s, dim=-1) @ kv.float(), atol=2e-2, rtol=2e-2)


def if_body(src: str, head: str) -> str:
    """The text of the braces after the first line of `src` containing `head`."""
    start = src.index("{", src.index(head))
    depth = 0
    for i in range(start, len(src)):
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        if depth == 0:
            return src[start:i + 1]
    raise AssertionError(f"unbalanced braces after {head!r}")


# ---- the CPU reference ---------------------------------------------------------------------

def test_guarded_tiles_on_cpu():
    check_guarded(tilelang.compile(guarded_tiles(5, 2), target="cpu"), 5)


def test_mla_persistent_on_cpu():
    k = tilelang.compile(mla_persistent(3, 32, 96, 64, 16, 32, 16, blocks=2, threads=128), out_idx=[-1], target="cpu")
    check_mla(k, 3, 32, 96, 64, 16)


# ---- the barriers in the CUDA source -------------------------------------------------------

@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_barriers_go_inside_a_uniform_if(arch):
    src = tilelang.compile(guarded_tiles(5, 2), target={"kind": "cuda", "arch": arch}).get_kernel_source()
    body = if_body(src, "if (")
    # the copies' writes reach the gemm's reads through a barrier inside the if
    assert re.search(r"__syncthreads\(\);\s*tc::gemm", body) or re.search(r"__syncthreads\(\);[^;]*wgmma", body), body
    # the row max crosses warps through shared scratch: a barrier between its writes and reads
    scratch = (re.search(r"tc::vec_store<[^>]*>\(\(&(red_smem\w*)\[[^\n]*\n", body)   # a thread's rows: one vector
               or re.search(r"(red_smem\w*)\[[^\n]*\] = ", body))
    assert scratch, body
    after = body[scratch.end():]
    first_read = after.index(f"{scratch.group(1)}[")
    assert "__syncthreads();" in after[:first_read], body


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_mla_persistent_tile_has_its_barriers(arch):
    k = tilelang.compile(mla_persistent(4, 128, 512, 256, 64, 64, 64, blocks=3), out_idx=[-1],
                         target={"kind": "cuda", "arch": arch}, pass_configs={"tc.remapped_fragment_reads": True})
    body = if_body(k.get_kernel_source(), "if (")
    # Q's copy (waited for inside the if) reaches the first gemm through a barrier
    waited = body.index("cp_async_wait_all();")
    assert "__syncthreads();" in body[waited:body.index("tc::gemm_")], body
    # shared tiles written and read again inside the if: a barrier between
    names = set(re.findall(r"(red_smem\w*|S_shared|acc_s_cast_smem)\[", body))
    assert {"S_shared"} <= names and any(n.startswith("red_smem") for n in names), names
    for name in names:
        assert_barrier_between_write_and_read(body, name)


def assert_barrier_between_write_and_read(body: str, name: str) -> None:
    """The first store into shared tile `name` and the next statement that reads it have a
    `__syncthreads()` between them."""
    write = re.search(rf"(vec_store<[^>]*>\(\(&{name}\[|^\s*{name}\[[^\n]*\] = )", body, re.M)
    assert write, name
    rest = body[write.end():]
    lines = rest.split("\n")
    offset = len(lines[0]) + 1
    for line in lines[1:]:
        reads = name + "[" in line and not re.match(rf"\s*{name}\[[^\n]*\] = ", line) \
            and f"vec_store<" not in line
        if reads:
            break
        offset += len(line) + 1
    else:
        raise AssertionError(f"{name} is never read after its first write")
    assert "__syncthreads();" in rest[:offset], (name, rest[:offset])


def thread_guarded(n=128):
    """A guard on the thread index around two shared-memory statements: not block-uniform, so no
    barrier may go inside it (threads that skip the branch would never reach it)."""
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), Out: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((n,), "float32")
            S2 = T.alloc_shared((n,), "float32")
            x = T.alloc_fragment((n,), "float32")
            T.copy(A, x)
            T.fill(S2, 0)
            if tx < n // 2:
                S[tx] = A[tx] * 2.0
                S2[tx] = S[tx] + 1.0
            for i in T.Parallel(n):
                if x[i] > 0:
                    S[i] = x[i]
                    S2[i] = S[i] * 3.0
            T.copy(S2, Out)
    return main


@pytest.mark.cuda_compile
@pytest.mark.parametrize("arch", ARCHS)
def test_no_barrier_inside_a_per_thread_if(arch):
    src = tilelang.compile(thread_guarded(), out_idx=[-1], target={"kind": "cuda", "arch": arch}).get_kernel_source()
    ifs = [m.start() for m in re.finditer(r"\bif \(", src)]
    assert len(ifs) >= 2, src
    for at in ifs:
        assert "__syncthreads" not in if_body(src[at:], "if ("), src


def _lowered_kernel(func):
    from tilecraft.target import Target
    from tilecraft.transform.pipeline import run_pipeline
    out = run_pipeline(func, Target.resolve({"kind": "cuda", "arch": "sm_80"}))
    return collect(out.body, lambda n: isinstance(n, Kernel))[0]


def test_uniformity_of_conditions():
    """Block and loop indices (and lets of them) are uniform; the thread index, a register loaded
    at a thread's own address, and what is computed from them are not."""
    k = _lowered_kernel(thread_guarded())
    u = Uniformity(k)
    conds = [i.cond for i in collect(k.body, lambda n: isinstance(n, If))]
    assert conds and all(u.varies(c) for c in conds)
    k = _lowered_kernel(guarded_tiles(5, 2))
    u = Uniformity(k)
    ifs = collect(k.body, lambda n: isinstance(n, If))
    assert ifs and not u.varies(ifs[0].cond)  # t < n_tiles, t = w * blocks + bid

"""Probe (issue 9): how much would FlashAttention-3's intra-warpgroup overlap buy our warp-specialized
FlashAttention?  Compiles the reference kernel as tilecraft generates it, then a copy whose consumer loop is
rewritten by hand (a CUDA post-processing callback) into the overlapped order

    k = 0:      wait K/V(0); S = Q K(0)^T; softmax(0); O *= alpha(0); P(0) = half(S)
    k = 1..n-1: wait K/V(k); issue S = Q K(k)^T; issue O += P(k-1) V(k-1); wait S; softmax(k)
                (overlaps the P V wgmma); wait P V; release stage k-1; O *= alpha(k); P(k) = half(S)
    after:      O += P(n-1) V(n-1)

and times both beside SDPA (CUDA events, median).  Rows are checked against an fp32 reference first.
A measurement to decide whether the compiler should learn this order, not a kernel to ship.
    python scripts/repro/fa_overlap_probe.py   ->  a markdown table on stdout"""
from __future__ import annotations

import os
import re

os.environ.setdefault("TILECRAFT_DISABLE_CACHE", "1")  # the callback's cache token does not see rewrite()'s code

import torch  # noqa: E402
import torch.nn.functional as F

import tilecraft as tl
import tilecraft.kernels as K
from tilecraft.engine import callback
from tilecraft.profiler.bench import do_bench

SM90 = {"kind": "cuda", "arch": "sm_90a"}
FAST = {"tl.enable_fast_math": True}

# issue-only wgmma with A from registers: the packed A fragments live in the caller's array `pa`, which must
# stay untouched until the matching wait (wgmma reads registers asynchronously too)
HELPERS = r"""
namespace tcprobe {
template <int M, int N, int K, int WG, class T, int B_ROWS = K>
__device__ __forceinline__ void pv_issue(const T* A_regs, const T* B, float* C, tc::uint32_t (&a)[M / WG / 64][K / 16][4]) {
  using BOp = tc::detail::Sm90Operand<N, sizeof(T), false, B_ROWS>;
  constexpr int MI = M / WG / 64, KS = K / 16, NK = K / 8;
  const tc::uint64_t db = BOp::desc(tc::smem_addr(B));
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      const T* p = A_regs + 4 * (2 * kk + NK * mi);
      a[mi][kk][0] = tc::detail::MmaOp<T>::pack(p[0], p[1]);
      a[mi][kk][1] = tc::detail::MmaOp<T>::pack(p[2], p[3]);
      a[mi][kk][2] = tc::detail::MmaOp<T>::pack(p[4], p[5]);
      a[mi][kk][3] = tc::detail::MmaOp<T>::pack(p[6], p[7]);
    }
  tc::detail::wgmma_fence_operands<MI * N / 2>(C);
  tc::detail::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < KS; ++kk)
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
      tc::detail::wgmma_rs_n_pieces<N, 0, false, false, BOp>(C + mi * (N / 2), a[mi][kk], db, 16 * kk);
  tc::detail::wgmma_commit_group();
}
template <int NREG>
__device__ __forceinline__ void fence_regs(tc::uint32_t* r) {
#pragma unroll
  for (int i = 0; i < NREG; ++i) asm volatile("" : "+r"(r[i])::"memory");
}
}  // namespace tcprobe
"""


def _block(lines, start):
    """The index one past the `{ ... }` statement (or single line) that starts at lines[start]."""
    depth, i = 0, start
    while True:
        depth += lines[i].count("{") - lines[i].count("}")
        i += 1
        if depth <= 0 and (lines[i - 1].rstrip().endswith(("}", ";"))):
            return i


def rewrite(code: str) -> str:
    lines = code.split("\n")
    head = next(i for i, l in enumerate(lines) if re.match(r"\s*for \(int k = 0; k < .*; \+\+k\) \{$", l))
    bound = re.match(r"\s*for \(int k = 0; k < (.*); \+\+k\) \{$", lines[head]).group(1)
    end = _block(lines, head)
    body = lines[head + 1:end - 1]
    qk = next(i for i, l in enumerate(body) if "tc::gemm_ss_sm90<" in l)
    pv = next(i for i, l in enumerate(body) if "tc::gemm_rs_sm90<" in l)
    arrive = next(i for i, l in enumerate(body) if "mbar_arrive_warp" in l)
    resc = next(i for i, l in enumerate(body) if re.match(r"\s*acc_o\[.*\] = \(acc_o\[.*\* alpha", l)) - 2
    wait, init, soft = body[0], body[1:qk], body[qk + 1:resc]
    rest = body[resc:pv]  # O *= alpha; P = half(S)
    assert "mbar_wait_parity" in wait and not any("acc_o" in l or "acc_s_cast" in l for l in soft), soft
    m = re.search(r"gemm_rs_sm90<(\d+), (\d+), (\d+), (\d+), false, tc::half_t, (\d+)>\(\(&acc_s_cast\[0\]\), "
                  r"\((.*)\), \(&acc_o\[0\]\)\);", body[pv])
    M, N, Kd, WG, brows, vptr = m.groups()
    prev = lambda text: re.sub(r"\(k % (\d+)\)", r"((k - 1) % \1)", text)  # noqa: E731  (stage of k-1)
    vprev = prev(vptr)
    ind = "      "
    qk_async = re.sub(r"(tc::half_t), 0, ", r"\1, 1, ", body[qk])
    out = ["    {", "    const int k = 0;", *init, wait, body[qk], *soft, *rest, "    }",
           f"    tc::uint32_t pa[{int(M) // int(WG) // 64}][{int(Kd) // 16}][4];",
           f"    for (int k = 1; k < {bound}; ++k) {{", wait, *init, qk_async,
           f"{ind}tcprobe::pv_issue<{M}, {N}, {Kd}, {WG}, tc::half_t, {brows}>((&acc_s_cast[0]), ({vprev}), (&acc_o[0]), pa);",
           f"{ind}tc::detail::wgmma_wait_group<1>();", f"{ind}tc::detail::wgmma_fence_operands<64>(&acc_s[0]);",
           *soft,
           f"{ind}tc::detail::wgmma_wait_group<0>();", f"{ind}tc::detail::wgmma_fence_operands<64>(&acc_o[0]);",
           f"{ind}tcprobe::fence_regs<{int(M) // int(WG) // 64 * int(Kd) // 16 * 4}>(&pa[0][0][0]);",
           prev(body[arrive]), *rest, "    }",
           "    {", f"    const int k = ({bound}) - 1;", body[pv], "    }"]
    code = "\n".join(lines[:head] + out + lines[end:])
    return code.replace('extern "C" __global__', HELPERS + '\nextern "C" __global__', 1)


def main():
    print("| shape | variant | rel. error | ours ms | SDPA ms | SDPA / ours |")
    print("| --- | --- | --- | --- | --- | --- |")
    for b, h, s, d, causal in [(4, 16, 4096, 128, False), (4, 16, 4096, 128, True)]:
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.half) for _ in range(3))
        qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
        ref = F.scaled_dot_product_attention(qt.float(), kt.float(), vt.float(), is_causal=causal).transpose(1, 2)
        t_ref = do_bench(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), return_mode="median")
        for name, stages in (("as generated", 2), ("overlapped", 2), ("overlapped", 3)):
            fn = K.flash_attention.fn(b, h, s, d, is_causal=causal, block_M=128, block_N=128, num_stages=stages,
                                      threads=256)
            try:
                if name == "overlapped":
                    callback.register_cuda_postproc_callback(lambda code, target: rewrite(code))
                try:
                    kern = tl.compile(fn, target=SM90, pass_configs=FAST)
                finally:
                    callback._CUDA_POSTPROC.clear()
                o = torch.empty_like(q)
                kern(q, k, v, o)
                err = ((o.double() - ref.double()).norm() / ref.double().norm()).item()
                t = do_bench(lambda: kern(q, k, v, o), return_mode="median")
                print(f"| B{b} H{h} S{s} D{d} {'causal' if causal else 'full'} | {name} {stages} stages | {err:.1e} | "
                      f"{t:.4f} | {t_ref:.4f} | {t_ref / t:.2f} |", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"| B{b} H{h} S{s} D{d} | {name} {stages} | {type(e).__name__}: {str(e)[:300]} | | | |", flush=True)


if __name__ == "__main__":
    main()

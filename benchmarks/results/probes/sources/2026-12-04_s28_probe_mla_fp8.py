"""Where fp8-KV MLA decode's time goes (B64 H16 KV8192, the split kernel alone): source variants made by a
CUDA post-processing callback, timed in interleaved rounds (CUDA events, median).

  l2        every batch reads batch 0's KV and K_pe (4-8 MB, L2-resident): the kernel's time without DRAM
  chainsN   tc::gemm_ss splits its k16 steps over N accumulator chains (TC_GEMM_KCHAINS: a header change made
            for this probe only and reverted after it measured no gain, so the variant is a no-op now)
  noconv    the fp8 -> bf16 widening copy removed (wrong answers: timing only)
  w0/w1/w2  the widening's instructions (TC_WIDEN_PATH, session 28: casts / paired cvt / integer ops; a header
            macro made for this probe and removed once the paired cvt measured fastest: a no-op now)
  nostage   the converting copy not staged through registers (load, convert, store one vector at a time)
  onesync   the first of the two barriers between a cross-warp reduction's two shared writes removed
"""
import json, os, re, statistics, sys
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_timing import timeit   # probes/sources/probe_timing.py
import tilecraft
from tilecraft.engine import callback
from tilecraft.kernels import decode as D

dev = "cuda" if torch.cuda.is_available() else "cpu"
target = {"kind": "cuda", "arch": "sm_90a"} if dev == "cuda" else "cpu"
B, H, S = (64, 16, 8192) if dev == "cuda" else (2, 16, 256)
splits = 4


def edit(flags):
    def post(code, tgt):
        if "l2" in flags:
            code = re.sub(r"\(bz \* (4194304|524288|131072)\)", "0", code)   # KV / K_pe batch offsets
        if "noconv" in flags:
            code = "\n".join(l for l in code.splitlines() if "tc::vec_convert<tc::bfloat16_t, tc::fp8_e4m3_t" not in l
                              and "tc::vec_store<tc::bfloat16_t, tc::fp8_e4m3_t" not in l)   # the staged form's second half
        if "onesync" in flags:
            code = re.sub(r"(red_smem\w+\[\(tc_tid \* 2\)\] = \w+;\n)\s*__syncthreads\(\);\n", r"\1", code)
        m = re.search(r"w(\d)", flags)   # TC_WIDEN_PATH: 0 casts, 1 paired cvt, 2 integer ops
        if m:
            code = f"#define TC_WIDEN_PATH {m.group(1)}\n" + code
        m = re.search(r"chains(\d)", flags)
        if m:
            code = f"#define TC_GEMM_KCHAINS {m.group(1)}\n" + code
        return code
    return post


def build(kv_dtype, flags, cfg=None, nsplit=None):
    cfg = cfg or D.mla_decode_config(H)
    prog = D.mla_decode_split.get_tir(B, H, S, num_split=nsplit or splits, kv_dtype=kv_dtype, **cfg)
    callback._CUDA_POSTPROC.clear()
    from tilecraft.transform.cuda_ops import copy as lowering_copy
    lowering_copy.STAGED_CONVERT_BYTES = 0 if "nostage" in flags else 256   # the closure's flags key the cache
    if dev == "cuda":
        callback.register_cuda_postproc_callback(edit(flags))
    try:
        return tilecraft.compile(prog, out_idx=[-2, -1], target=target, pass_configs={"tl.enable_fast_math": True})
    finally:
        callback._CUDA_POSTPROC.clear()


torch.manual_seed(0)
q_nope = torch.randn(B, H, 512, dtype=torch.bfloat16, device=dev)
q_pe = torch.randn(B, H, 64, dtype=torch.bfloat16, device=dev)
kv32 = torch.randn(B, S, 512, device=dev)
k_pe = torch.randn(B, S, 64, dtype=torch.bfloat16, device=dev)
seqlens = torch.full((B,), S, dtype=torch.int32, device=dev)
scale = (kv32.abs().amax() / 448.0).reshape(1)
inputs = {"bfloat16": (kv32.bfloat16(), torch.ones(1, device=dev)),
          "float8_e4m3fn": ((kv32 / scale).to(torch.float8_e4m3fn), scale)}
del kv32
variants = os.environ.get("VARIANTS", "fp8:base,bf16:base,fp8:chains2,fp8:chains4,fp8:onesync,fp8:chains4+onesync,"
                          "bf16:chains4,fp8:l2,bf16:l2,fp8:l2+noconv,fp8:l2+chains4,fp8:l2+chains4+onesync,"
                          "fp8:l2+chains4+onesync+noconv,bf16:l2+chains4+onesync").split(",")
fns, errs = {}, {}
for v in variants:
    dt, flags = v.split(":")
    cfg, nsplit = None, None
    if "@" in flags:   # a config: fp8:base@bn64/t128/s2/sp4 (block_N, threads, num_stages, splits)
        flags, spec = flags.split("@")
        f = dict((k.rstrip("0123456789"), int(k[len(k.rstrip("0123456789")):])) for k in spec.split("/"))
        cfg = dict(block_H=16, block_N=f["bn"], threads=f["t"], num_stages=f["s"])
        nsplit = f["sp"]
    kv_dtype = "bfloat16" if dt == "bf16" else "float8_e4m3fn"
    kv, s_ = inputs[kv_dtype]
    k = build(kv_dtype, flags, cfg, nsplit)
    fn = (lambda k=k, kv=kv, s_=s_: k(q_nope, q_pe, kv, k_pe, s_, seqlens))
    o, lse = fn()
    if "l2" not in flags and "noconv" not in flags:
        combine = D.decode_combine(B, H, nsplit or splits, 512, dtype="bfloat16")
        out = torch.empty(B, H, 512, dtype=torch.bfloat16, device=dev)
        combine(o, lse, out)
        ref = D.ref_mla_decode(q_nope, q_pe, kv, k_pe, seqlens, None if dt == "bf16" else s_)
        errs[v] = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
        assert errs[v] < 1e-2, (v, errs[v])
    fns[v] = fn
    print(v, "built", errs.get(v), flush=True)
if dev != "cuda":
    sys.exit(0)
times = {v: [] for v in fns}
for r in range(9):
    for v, fn in fns.items():
        times[v].append(timeit(fn))
kv_bytes = {"bf16": B * S * (512 * 2 + 64 * 2), "fp8": B * S * (512 + 64 * 2)}
rows = []
for v, t in times.items():
    med = statistics.median(t)
    dt = v.split(":")[0]
    rows.append({"variant": v, "us": round(med * 1000, 1), "min_us": round(min(t) * 1000, 1),
                 "TB/s": round(kv_bytes[dt] / med / 1e9, 2), "err": errs.get(v)})
    print(json.dumps(rows[-1]), flush=True)
if os.environ.get("OUT"):
    json.dump(rows, open(os.path.join(os.environ["OUT"], "probe_mla_fp8.json"), "w"), indent=1)

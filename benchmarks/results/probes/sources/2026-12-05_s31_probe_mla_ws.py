"""fp8-KV MLA decode, B64 H16 KV8192 (issue 25): the hand warp-specialized split kernel (`mla_decode_split_ws`:
a producer warp group widens the fp8 KV tile into a ring of two bf16 stages) against the current split kernel
(`mla_decode_split`: the widening on the four consumer warps) and the bf16-KV kernel, in interleaved rounds
(CUDA events, median of 9 rounds of 20 calls), beside a device copy of the same bytes timed in the same rounds.

  base          mla_decode_split as `mla_decode` runs it (32 KV rows, 4 warps, cp.async, 2 stages, 4 splits)
  ws            mla_decode_split_ws, widen_from="shared" (fp8 tile by cp.async into a staging tile)
  ws-regs       widen_from="regs" (the fp8 tile through registers: ptxas spills 328 bytes, compile-time report)
  ws-noconv     ws with the widening's stores removed (wrong answers: the consumer's floor with a free producer)
  base-noconv   base likewise (session 28: 122 us L2-resident)
  wst           mla_decode_split_ws(transposed=True): S^T = KV Q^T and O^T += KV^T P^T on wgmma (64 KV rows a
                tile, N = 16 heads), one block an SM (211 KB of shared memory)
  wst-w64       wst widening its 64-row tile in one converting copy (32 vectors a thread: not staged through
                registers, each vector loaded, converted and stored in turn) instead of two of 32 rows (staged)
  t             mla_decode_split_t: the transposed consumer (as wst) in a loop the compiler pipelines (TMA from
                its own producer warp group), the widening on the consumer's path; t-s3: three stages
  @N            N splits instead of 4 (its own combine)
  +comb         the same split kernel followed by the combine (what `mla_decode` and the bench row time)
Correctness: every variant but noconv against torch (fp32 reference) on the timed inputs, and the ws
and wst kernels on fresh ragged inputs (B32 H16 KV4000, random lengths, 8 splits; B3 H20 KV1000, 3 splits)."""
import json, os, statistics, sys
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
PC = {"tl.enable_fast_math": True}


def edit(flags):
    def post(code, tgt):   # the closure's flags key the kernel cache
        if "noconv" in flags:
            code = "\n".join(l for l in code.splitlines() if "tc::vec_store<tc::bfloat16_t, tc::fp8_e4m3_t" not in l
                              and "tc::vec_convert<tc::bfloat16_t, tc::fp8_e4m3_t" not in l)
        return code
    return post


def build(kind, kv_dtype, nsplit=splits):
    callback._CUDA_POSTPROC.clear()
    if dev == "cuda":
        callback.register_cuda_postproc_callback(edit(kind))
    try:
        if kind.startswith("base"):
            prog = D.mla_decode_split.get_tir(B, H, S, num_split=nsplit, kv_dtype=kv_dtype, **D.mla_decode_config(H))
        elif kind == "t" or kind.startswith("t-"):
            prog = D.mla_decode_split_t.get_tir(B, H, S, num_split=nsplit, kv_dtype=kv_dtype,   # 3 stages: the default
                                                num_stages=3 if "s3" in kind else 2)
        else:
            kw = dict(widen_from="regs") if "regs" in kind else {}
            kw.update(transposed=kind.startswith("wst"), widen_rows=64 if "w64" in kind else 32)
            prog = D.mla_decode_split_ws.get_tir(B, H, S, num_split=nsplit, kv_dtype=kv_dtype, **kw)
        return tilecraft.compile(prog, out_idx=[-2, -1], target=target, pass_configs=PC)
    finally:
        callback._CUDA_POSTPROC.clear()


def rel(o, ref):
    return ((o.double() - ref.double()).norm() / ref.double().norm()).item()


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
out = torch.empty(B, H, 512, dtype=torch.bfloat16, device=dev)
variants = os.environ.get("VARIANTS", "fp8:base,bf16:base,fp8:ws,fp8:wst,fp8:t,fp8:t-s3,fp8:t-noconv,"
                          "fp8:base-noconv,fp8:wst-noconv").split(",")
fns, errs, res = {}, {}, {}
for v in variants:
    dt, kind = v.split(":")
    kind, nsplit = (kind.split("@")[0], int(kind.split("@")[1])) if "@" in kind else (kind, splits)
    combine = D.decode_combine(B, H, nsplit, 512, dtype="bfloat16")
    kv_dtype = "bfloat16" if dt == "bf16" else "float8_e4m3fn"
    kv, s_ = inputs[kv_dtype]
    k = build(kind, kv_dtype, nsplit)
    if dev == "cuda":
        from tilecraft.compiler.sass import resource_usage
        res[v] = resource_usage(k.artifact.binary)
    fn = (lambda k=k, kv=kv, s_=s_: k(q_nope, q_pe, kv, k_pe, s_, seqlens))
    o, lse = fn()
    if "noconv" not in kind:
        combine(o, lse, out)
        ref = D.ref_mla_decode(q_nope, q_pe, kv, k_pe, seqlens, None if dt == "bf16" else s_)
        errs[v] = rel(out, ref)
        assert errs[v] < 1e-2, (v, errs[v])
    fns[v] = fn
    fns[v + "+comb"] = (lambda fn=fn, combine=combine: combine(*fn(), out))
    print(v, "built", errs.get(v), res.get(v), flush=True)

# the ws kernel through mla_decode on fresh ragged inputs (lengths ending mid-tile, empty splits)
for (b, h, s, ns, tr) in ([(32, 16, 4000, 8, False), (3, 20, 1000, 3, False), (32, 16, 4000, 8, True),
                           (3, 20, 1000, 3, True), (32, 16, 4000, 8, "t"), (3, 20, 1000, 3, "t")]
                          if dev == "cuda" else [(2, 20, 200, 3, False), (2, 20, 300, 3, True), (2, 20, 300, 3, "t")]):
    qn, qp = torch.randn(b, h, 512, dtype=torch.bfloat16, device=dev), torch.randn(b, h, 64, dtype=torch.bfloat16, device=dev)
    kvf, kp = torch.randn(b, s, 512, device=dev), torch.randn(b, s, 64, dtype=torch.bfloat16, device=dev)
    sl = torch.randint(1, s + 1, (b,), dtype=torch.int32, device=dev)
    sc = (kvf.abs().amax() / 448.0).reshape(1)
    kv8 = (kvf / sc).to(torch.float8_e4m3fn)
    k = D.mla_decode_split_t(b, h, s, 512, 64, ns, kv_dtype="float8_e4m3fn") if tr == "t" else \
        D.mla_decode_split_ws(b, h, s, 512, 64, ns, transposed=tr)
    o = D.decode_combine(b, h, ns, 512, dtype="bfloat16")(*k(qn, qp, kv8, kp, sc, sl))
    e = rel(o, D.ref_mla_decode(qn, qp, kv8, kp, sl, sc))
    errs[f"ragged B{b} H{h} KV{s} splits{ns} {'t' if tr == 't' else 'wst' if tr else 'ws'}"] = e
    print("ragged", b, h, s, ns, tr, e, flush=True)
    assert e < 1e-2
if dev != "cuda":
    sys.exit(0)

kv_bytes = B * S * (512 + 64 * 2)          # what the fp8 kernel must read
src = torch.empty(kv_bytes // 2, dtype=torch.uint8, device=dev).random_(0, 255)
dst = torch.empty_like(src)
fns["copy (same bytes moved)"] = lambda: dst.copy_(src)
times = {v: [] for v in fns}
for r in range(9):
    for v, fn in fns.items():
        times[v].append(timeit(fn))
copy_ms = statistics.median(times["copy (same bytes moved)"])
rows = []
for v, t in times.items():
    med = statistics.median(t)
    byts = kv_bytes if not v.startswith("bf16") else B * S * (512 * 2 + 64 * 2)
    rows.append({"variant": v, "us": round(med * 1000, 1), "min_us": round(min(t) * 1000, 1),
                 "max_us": round(max(t) * 1000, 1), "TB/s": round(byts / med / 1e9, 2),
                 "pct_copy": round(100 * (byts / med) / (kv_bytes / copy_ms), 1), "err": errs.get(v.replace("+comb", "")),
                 "res": res.get(v.replace("+comb", ""))})
    print(json.dumps(rows[-1]), flush=True)
rows.append({"ragged": {k: v for k, v in errs.items() if k.startswith("ragged")}})
if os.environ.get("OUT"):
    json.dump(rows, open(os.path.join(os.environ["OUT"], "probe_mla_ws.json"), "w"), indent=1)

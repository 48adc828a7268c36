"""Issue 25's grouped-GEMM goal (>= 1.5x the torch loop, 8-64 groups) against what the same FLOPs cost dense:
for the bench's three cases, rounds interleaved, CUDA-event medians: the torch loop (as bench_new_kernels.py
times it), the loop's GPU time alone (captured in a CUDA graph: no host launch gaps), torch._grouped_mm, ours
(kernels/grouped_gemm.py, default tile), and a dense torch.mm of all rows against one weight (the same
FLOPs with 1/G of the weight bytes: an optimistic bound for any grouped kernel at cuBLAS's efficiency)."""
import json, os, statistics
import sys
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_timing import timeit   # probes/sources/probe_timing.py
from tilecraft.kernels import grouped_gemm as GG

dev = "cuda"
cases = [(8, 4096, 2048, 512), (16, 7168, 2048, 256), (32, 4096, 2048, 256), (64, 4096, 2048, 128)]
ROUNDS = 9


out = []
for groups, N, K, mean_m in cases:
    gen = torch.Generator().manual_seed(groups)
    sizes = torch.randint(mean_m // 2, mean_m * 3 // 2 + 1, (groups,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)]).to(torch.int32).to(dev)
    total = int(offsets[-1])
    bounds = offsets.tolist()
    a = torch.randn(total, K, dtype=torch.bfloat16, device=dev)
    b = torch.randn(groups, N, K, dtype=torch.bfloat16, device=dev) / K ** 0.5
    ref = GG.ref_grouped_gemm(a, b, offsets, True)

    def loop():
        return torch.cat([a[bounds[g]:bounds[g + 1]] @ b[g].t() for g in range(groups)])
    loop(); torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loop_out = loop()
    tiles = GG.tile_offsets(offsets, 128)
    kern = GG.grouped_matmul(total, N, K, groups, trans_B=True, dtype="bfloat16")
    c = torch.full((total, N), float("nan"), dtype=torch.bfloat16, device=dev)
    kern(a, b, offsets, tiles, c)
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-2, err
    w = b[0].t()
    fns = {"torch loop": loop, "torch loop (graph)": graph.replay, "ours": lambda: kern(a, b, offsets, tiles, c),
           "dense mm": lambda: a @ w}
    if hasattr(torch, "_grouped_mm"):
        bt, ends = b.transpose(1, 2), offsets[1:].contiguous()
        fns["torch._grouped_mm"] = lambda: torch._grouped_mm(a, bt, offs=ends)
    times = {n: [] for n in fns}
    for _ in range(ROUNDS):
        for n, f in fns.items():
            times[n].append(timeit(f))
    med = {n: statistics.median(v) for n, v in times.items()}
    flops = 2 * total * N * K
    row = {"groups": groups, "N": N, "K": K, "M_total": total, "err": err,
           **{f"{n} ms": round(m, 4) for n, m in med.items()},
           **{f"{n} TFLOP/s": round(flops / m / 1e9, 1) for n, m in med.items()},
           "ours vs loop": round(med["torch loop"] / med["ours"], 3),
           "dense vs loop": round(med["torch loop"] / med["dense mm"], 3),
           "ours vs dense": round(med["dense mm"] / med["ours"], 3)}
    print(json.dumps(row), flush=True)
    out.append(row)
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "probe_grouped_bound.json"), "w") as f:
        json.dump(out, f, indent=1)

"""Grouped GEMM epilogue probe: old (element stores) vs 16-byte stores of full tiles (plain / padded tile)."""
import json, os, statistics, sys, time
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_timing import timeit   # probes/sources/probe_timing.py
import gg_variants as G   # benchmarks/results/probes/sources/gg_variants.py
from tilecraft.kernels import grouped_gemm as GG

dev = "cuda" if torch.cuda.is_available() else "cpu"
target = "cuda -arch=sm_90a" if dev == "cuda" else "cpu"
cases = [(8, 4096, 2048, 512), (64, 4096, 2048, 128), (16, 7168, 2048, 256)] if dev == "cuda" else [(4, 256, 128, 100)]
variants = ["old", "shared_copy", "pad"]
out = []


for groups, N, K, mean_m in cases:
    gen = torch.Generator().manual_seed(groups)
    sizes = torch.randint(mean_m // 2, mean_m * 3 // 2 + 1, (groups,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)]).to(torch.int32).to(dev)
    total = int(offsets[-1])
    a = torch.randn(total, K, dtype=torch.bfloat16, device=dev)
    b = torch.randn(groups, N, K, dtype=torch.bfloat16, device=dev) / K ** 0.5
    ref = GG.ref_grouped_gemm(a, b, offsets, True)
    tiles = GG.tile_offsets(offsets, 128)
    bounds = offsets.tolist()
    fns = {}
    for v in variants:
        k = G.compile_variant(v, total, N, K, groups, target=target)
        c = torch.full((total, N), float("nan"), dtype=torch.bfloat16, device=dev)
        k(a, b, offsets, tiles, c)
        err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
        print(groups, v, "err", err, flush=True)
        assert err < 1e-2, (v, err)
        fns[v] = (lambda k=k, c=c: k(a, b, offsets, tiles, c))
    if dev != "cuda":
        continue
    fns["torch loop"] = lambda: torch.cat([a[bounds[g]:bounds[g + 1]] @ b[g].t() for g in range(groups)])
    bt = b.transpose(1, 2)
    if hasattr(torch, "_grouped_mm"):
        fns["_grouped_mm"] = lambda: torch._grouped_mm(a, bt, offs=offsets[1:])
    times = {n: [] for n in fns}
    for r in range(9):
        for n, fn in fns.items():
            times[n].append(timeit(fn))
    med = {n: statistics.median(t) for n, t in times.items()}
    flops = 2 * total * N * K
    row = {"groups": groups, "N": N, "K": K, "total_M": total,
           **{f"{n}_ms": round(m, 4) for n, m in med.items()},
           **{f"{n}_tflops": round(flops / m / 1e9, 1) for n, m in med.items()}}
    for v in variants:
        rat = sorted(o / p for o, p in zip(times["old"], times[v]))
        row[f"{v}_vs_old"] = round(statistics.median(rat), 3)
        row[f"{v}_vs_loop"] = round(statistics.median(sorted(l / p for l, p in zip(times["torch loop"], times[v]))), 3)
        if "_grouped_mm" in times:
            row[f"{v}_vs_grouped_mm"] = round(statistics.median(sorted(l / p for l, p in zip(times["_grouped_mm"], times[v]))), 3)
    print(json.dumps(row), flush=True)
    out.append(row)
if os.environ.get("OUT"):
    json.dump(out, open(os.path.join(os.environ["OUT"], "probe_grouped.json"), "w"), indent=1)

"""stage_epilogue on a grouped GEMM written as TileLang's examples end it (a guarded fragment store):
staged (default) vs `tc.stage_epilogue: False` vs kernels/grouped_gemm.py (staged by hand, session 25)
vs torch._grouped_mm, rounds interleaved, CUDA-event medians.  The user-form kernel is the test's
(tests/cpu/test_stage_guarded_epilogue.py `grouped`), in bf16, trans_B (nn.Linear weights)."""
import json, os, statistics, sys
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_timing import timeit   # probes/sources/probe_timing.py
import tilecraft
import tilecraft.language as T
from tilecraft.kernels import grouped_gemm as GG

dev = "cuda" if torch.cuda.is_available() else "cpu"
target = {"kind": "cuda", "arch": "sm_90a"} if dev == "cuda" else "cpu"
cases = [(8, 4096, 2048, 512), (64, 4096, 2048, 128), (16, 7168, 2048, 256)] if dev == "cuda" else [(3, 256, 128, 100)]
ROUNDS = 9 if dev == "cuda" else 1


def user_form(total_M, N, K, groups, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256):
    max_tiles = -(-total_M // block_M) + groups

    @T.prim_func
    def main(A: T.Tensor((total_M, K), "bfloat16"), B: T.Tensor((groups, N, K), "bfloat16"),
             Offsets: T.Tensor((groups + 1,), "int32"), Tile_offsets: T.Tensor((groups + 1,), "int32"),
             C: T.Tensor((total_M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), max_tiles, threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "bfloat16")
            B_shared = T.alloc_shared((block_N, block_K), "bfloat16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            g = T.alloc_var("int32")
            g = 0
            for i in T.serial(groups - 1):
                if Tile_offsets[i + 1] <= by:
                    g = i + 1
            valid = by < Tile_offsets[groups]
            row0 = Offsets[g] + (by - Tile_offsets[g]) * block_M
            rows = T.max(0, T.min(block_M, Offsets[g + 1] - row0))
            T.clear(acc)
            for ko in T.Pipelined(T.if_then_else(valid, T.ceildiv(K, block_K), 0), num_stages=num_stages):
                T.copy(A[row0, ko * block_K], A_shared)
                T.copy(B[g, bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                if i < rows:
                    C[row0 + i, bx * block_N + j] = acc[i, j]
    return main


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
    fns = {}
    for name, cfg in [("staged", None), ("unstaged", {"tc.stage_epilogue": False})]:
        kw = {} if dev == "cuda" else dict(block_M=128, block_N=64, block_K=32, threads=128)
        k = tilecraft.compile(user_form(total, N, K, groups, **kw), target=target, pass_configs=cfg)
        assert dev != "cuda" or ("C_stage" in k.get_kernel_source()) == (name == "staged")
        c = torch.full((total, N), float("nan"), dtype=torch.bfloat16, device=dev)
        k(a, b, offsets, tiles, c)
        err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
        print(groups, name, "err", err, flush=True)
        assert err < 1e-2, (name, err)
        fns[name] = (lambda k=k, c=c: k(a, b, offsets, tiles, c))
    if dev != "cuda":
        continue
    hand = GG.grouped_matmul(total, N, K, groups, trans_B=True, dtype="bfloat16")
    c2 = torch.empty(total, N, dtype=torch.bfloat16, device=dev)
    fns["kernels.grouped_gemm"] = lambda: hand(a, b, offsets, tiles, c2)
    if hasattr(torch, "_grouped_mm"):
        offs_end = offsets[1:].contiguous()
        bt = b.transpose(1, 2)
        fns["torch._grouped_mm"] = lambda: torch._grouped_mm(a, bt, offs=offs_end)
    times = {n: [] for n in fns}
    for _ in range(ROUNDS):
        for n, f in fns.items():
            times[n].append(timeit(f))
    med = {n: statistics.median(v) for n, v in times.items()}
    flops = 2 * total * N * K
    row = {"groups": groups, "N": N, "K": K, "M_total": total,
           **{f"{n}_ms": round(m, 4) for n, m in med.items()},
           "staged_vs_unstaged": round(med["unstaged"] / med["staged"], 3),
           "staged_TFLOPs": round(flops / med["staged"] / 1e9, 1)}
    if "torch._grouped_mm" in med:
        row["staged_vs_grouped_mm"] = round(med["torch._grouped_mm"] / med["staged"], 3)
    print(json.dumps(row), flush=True)
    out.append(row)
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "probe_guarded_epilogue.json"), "w") as f:
        json.dump(out, f, indent=1)

"""bench.py's groups for issue 25's kernels: FlashAttention backward, FP8 GEMM, decode attention, grouped
GEMM.  Each group is `g_<name>(rows)`, using the bench module's helpers (case, rand, pick, ...); bench.py
registers them (`register`) as its own `g_<name>`.  References (timed): SDPA's backward through autograd,
torch._scaled_mm (per-tensor; also the reference of the block-scaled kernel, whose goal is >= 0.9x of
it), SDPA for decode (all sequences full: the GQA form through enable_gqa, MLA with the heads as the
query positions), and for grouped GEMM the torch loop and torch._grouped_mm where present.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def nan_like(t):
    return torch.full_like(t, float("nan"))


def g_attention_bwd(rows):
    from tilecraft.kernels import attention_bwd as A
    shapes = _B.pick([(4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (4, 16, 4096, 64, False),
                      (4, 16, 4096, 64, True)], [(1, 8, 1024, 128, False), (1, 8, 1024, 64, True)],
                     [(1, 2, 128, 64, False), (1, 2, 128, 64, True)])
    for b, h, s, d, causal in shapes:
        q, k, v, do = (_B.rand(b, s, h, d) for _ in range(4))
        qt, kt, vt = (t.transpose(1, 2).contiguous().requires_grad_(True) for t in (q, k, v))
        dot = do.transpose(1, 2).contiguous()
        o_t = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        o, lse = A.flash_attention_fwd_lse(b, h, s, d, causal)(q, k, v)
        flops = 10 * b * h * s * s * d // (2 if causal else 1)   # 5 gemms of 2*s*s*d (FlashAttention-2's count)
        # the fastest measured on the H200 with dQ added by bulk reduces (session 17, benchmarks/attention_bwd_probe.py):
        # 128 keys per block halves the dQ adds; D64 fits 128 queries per step (every gemm on wgmma)
        cfg = dict(block_M=128, block_N=128 if d <= 64 else 64, num_stages=2, threads=256) if not _B.on_cpu() \
            else dict(block_M=64, block_N=64, num_stages=2)
        out = torch.empty(3 * q.numel(), dtype=torch.float32, device=q.device)

        def build(b=b, h=h, s=s, d=d, q=q, k=k, v=v, o=o, do=do, lse=lse, causal=causal, cfg=cfg, out=out):
            pre = A.flash_attention_bwd_preprocess(b, h, s, d)
            bwd = A.flash_attention_bwd(b, h, s, d, causal, **cfg)
            post = A.flash_attention_bwd_postprocess(b, h, s, d)
            dq_acc, dk, dv = (torch.empty(b, h, s, d, dtype=torch.float32, device=q.device), nan_like(k),
                              nan_like(v))

            def run():   # preprocess, backward (dQ zeroed and accumulated atomically), dQ cast
                dq_acc.zero_()
                bwd(q, k, v, do, lse, pre(o, do), dq_acc, dk, dv)
                return post(dq_acc), dk, dv
            out.copy_(torch.cat([g.flatten().float() for g in run()]))   # the checked output, not timed
            return run, out

        def ref(qt=qt, kt=kt, vt=vt, o_t=o_t, dot=dot, q=q, k=k, v=v, do=do, causal=causal):
            fn = lambda: torch.autograd.grad(o_t, (qt, kt, vt), dot, retain_graph=True)  # noqa: E731
            return fn, torch.cat([g.flatten() for g in A.ref_attention_backward(q, k, v, do, causal)])
        tile = f"{cfg['block_M']}x{cfg['block_N']}/{cfg['num_stages']}/{cfg.get('threads', 128)}"
        _B.case(rows, f"flash_attn bwd fp16 {'causal' if causal else 'full'} {tile}",
                f"B{b} H{h} S{s} D{d}", build, ref, 1e-2, flops=flops, ref_name="SDPA backward (autograd)")


def g_fp8_gemm(rows):
    from tilecraft.kernels import gemm_fp8 as G
    if _B.on_cpu():   # no fp8 tensor-core path to time on the CPU target
        return
    # 8192^3 only once fp8 T.gemm has a tensor-core path: on the scalar fallback (the plan says which) one
    # call would take a good part of a second and the row would tell nothing new
    on_tc = "scalar" not in G.fp8_matmul(4096, 4096, 4096).get_plan()
    for s in _B.pick([4096, 8192] if on_tc else [4096], [2048], [256]):
        a, b = _B.rand(s, s, dtype=torch.float32), _B.rand(s, s, dtype=torch.float32)
        qa, sa = G.quantize_fp8_per_tensor(a)
        qb, sb = G.quantize_fp8_per_tensor(b)
        ref_fn = lambda qa=qa, qb=qb, sa=sa, sb=sb: torch._scaled_mm(qa, qb.t(), scale_a=sa, scale_b=sb,  # noqa: E731
                                                                      out_dtype=torch.bfloat16)
        # like for like: the per-tensor kernel accumulates on the tensor cores without promotion, as
        # cuBLAS does with use_fast_accum=True (same error on the H200); the block-scaled kernel promotes
        # every k-block into fp32 registers, as cuBLAS's default does
        fast_fn = lambda qa=qa, qb=qb, sa=sa, sb=sb: torch._scaled_mm(qa, qb.t(), scale_a=sa, scale_b=sb,  # noqa: E731
                                                                       out_dtype=torch.bfloat16, use_fast_accum=True)
        c = torch.empty(s, s, dtype=torch.bfloat16, device="cuda")

        def build(s=s, qa=qa, qb=qb, sa=sa, sb=sb, c=c):
            kern = G.fp8_matmul(s, s, s, out_dtype="bfloat16")
            c.fill_(float("nan"))
            return (lambda: kern(qa, qb, sa, sb, c)), c
        r = _B.case(rows, "fp8 gemm per-tensor e4m3 -> bf16 128x128x128/3/128", f"{s}^3", build,
                    lambda fast_fn=fast_fn, qa=qa, qb=qb, sa=sa, sb=sb: (fast_fn, G.ref_fp8_matmul(qa, qb, sa, sb)),
                    1e-2, flops=2 * s ** 3, ref_name="torch._scaled_mm per-tensor fast_accum", peak_scale=2.0)
        if not on_tc:
            r["note"] = ("fp8 T.gemm on scalar dot products (no fp8 tensor-core path yet); " + r["note"]).rstrip("; ")
        else:  # the fp16 GEMM's best tile (two consumer warpgroups, 128x256): wgmma n256 k32 steps

            def build_wide(s=s, qa=qa, qb=qb, sa=sa, sb=sb, c=c):
                kern = G.fp8_matmul(s, s, s, block_N=256, threads=256, out_dtype="bfloat16")
                c.fill_(float("nan"))
                return (lambda: kern(qa, qb, sa, sb, c)), c
            _B.case(rows, "fp8 gemm per-tensor e4m3 -> bf16 128x256x128/3/256", f"{s}^3", build_wide,
                    lambda fast_fn=fast_fn, qa=qa, qb=qb, sa=sa, sb=sb: (fast_fn, G.ref_fp8_matmul(qa, qb, sa, sb)),
                    1e-2, flops=2 * s ** 3, ref_name="torch._scaled_mm per-tensor fast_accum", peak_scale=2.0)
        ba, bsa = G.quantize_fp8_activations(a)
        bb, bsb = G.quantize_fp8_blocks(b, 128)

        def build_bs(s=s, ba=ba, bb=bb, bsa=bsa, bsb=bsb, c=c):
            kern = G.fp8_matmul_blockscaled(s, s, s, out_dtype="bfloat16")
            c.fill_(float("nan"))
            return (lambda: kern(ba, bb, bsa, bsb, c)), c
        _B.case(rows, "fp8 gemm 1x128/128x128 block scales -> bf16 128x128x(2x128)/3/256", f"{s}^3", build_bs,
                lambda ref_fn=ref_fn, ba=ba, bb=bb, bsa=bsa, bsb=bsb: (
                    ref_fn, G.ref_fp8_matmul_blockscaled(ba, bb, bsa, bsb)),
                1e-2, flops=2 * s ** 3, ref_name="torch._scaled_mm per-tensor", peak_scale=2.0)


def g_decode(rows):
    from tilecraft.kernels import decode as D
    dev = _B.STATE["device"]
    gqa = _B.pick([(1, 32, 8, 65536), (16, 32, 8, 8192), (64, 32, 8, 4096)], [(16, 32, 8, 8192)], [(2, 8, 2, 1024)])
    for batch, heads, kv_heads, seq_kv in gqa:
        dim = 128
        splits = D.decode_splits(kv_heads * batch, seq_kv) if not _B.on_cpu() else 4   # ~4 blocks per SM
        q = _B.rand(batch, heads, dim)
        k, v = (_B.rand(batch, seq_kv, kv_heads, dim) for _ in range(2))
        seqlens = torch.full((batch,), seq_kv, dtype=torch.int32, device=dev)
        qs, ks, vs = q[:, :, None], k.transpose(1, 2), v.transpose(1, 2)   # SDPA layout, made up front
        ref_fn = lambda qs=qs, ks=ks, vs=vs: F.scaled_dot_product_attention(qs, ks, vs, enable_gqa=True)  # noqa: E731
        out = torch.full((batch, heads, dim), float("nan"), dtype=torch.float16, device=dev)

        def build(q=q, k=k, v=v, seqlens=seqlens, out=out, splits=splits, shape=(batch, heads, kv_heads, seq_kv, dim)):
            split = D.gqa_decode_split(*shape, splits)
            combine = D.decode_combine(shape[0], shape[1], splits, shape[4])
            table = torch.zeros(shape[0], 1, dtype=torch.int32, device=q.device)
            run = lambda: combine(*split(q, k, v, seqlens, table), out)  # noqa: E731
            return run, out
        _B.case(rows, f"gqa decode fp16 split {splits}", f"B{batch} H{heads}/{kv_heads} KV{seq_kv} D{dim}", build,
                lambda ref_fn=ref_fn, q=q, k=k, v=v, seqlens=seqlens: (ref_fn, D.ref_gqa_decode(q, k, v, seqlens)),
                1e-2, bytes_=2 * k.numel() * 2, ref_name="SDPA (enable_gqa)")
    mla = _B.pick([(1, 128, 32768), (64, 16, 8192)], [(16, 128, 4096)], [(1, 16, 512)])
    # fp8 KV at <= 16 heads a block: the kernel mla_decode runs, and each other form (D.MLA_FP8_FORMS) as its own
    # row, so one run shows them side by side (issue 25, session 31)
    forms = [(m, t, None) for m in mla for t in ("bfloat16", "float8_e4m3fn")]
    forms += [(m, "float8_e4m3fn", f) for m in mla if D.mla_decode_config(m[1])["block_H"] <= 16
              for f in D.MLA_FP8_FORMS if f != D.MLA_FP8_FORM]
    for (batch, heads, seq_kv), kv_dtype, form in forms:
        q_nope, q_pe = _B.rand(batch, heads, 512, dtype=torch.bfloat16), _B.rand(batch, heads, 64, dtype=torch.bfloat16)
        kv32, k_pe = _B.rand(batch, seq_kv, 512, dtype=torch.float32), _B.rand(batch, seq_kv, 64, dtype=torch.bfloat16)
        scale = None
        if kv_dtype == "bfloat16":
            kv = kv32.bfloat16()
        else:
            scale = (kv32.abs().amax() / 448.0).reshape(1)
            kv = (kv32 / scale).to(torch.float8_e4m3fn)
        del kv32
        seqlens = torch.full((batch,), seq_kv, dtype=torch.int32, device=dev)
        qcat = torch.cat([q_nope, q_pe], -1)[:, None]                       # heads as the query positions
        kcat = torch.cat([kv.to(torch.bfloat16), k_pe], -1)[:, None]
        vref = kv.to(torch.bfloat16)[:, None]
        ref_fn = lambda qcat=qcat, kcat=kcat, vref=vref: F.scaled_dot_product_attention(qcat, kcat, vref)  # noqa: E731
        out = torch.full((batch, heads, 512), float("nan"), dtype=torch.bfloat16, device=dev)
        cfg = D.mla_decode_config(heads)
        splits = D.mla_decode_splits(batch, heads, seq_kv, cfg["block_H"], cfg.get("block_N", 64)) \
            if not _B.on_cpu() else 16

        def build(q_nope=q_nope, q_pe=q_pe, kv=kv, k_pe=k_pe, seqlens=seqlens, scale=scale, out=out, cfg=cfg,
                  shape=(batch, heads, seq_kv), kv_dtype=kv_dtype, splits=splits, form=form):
            split = D.mla_decode_kernel(*shape, 512, 64, splits, kv_dtype=kv_dtype, form=form, **cfg)
            combine = D.decode_combine(shape[0], shape[1], splits, 512, dtype="bfloat16")
            s_ = scale if scale is not None else torch.ones(1, device=kv.device)
            run = lambda: combine(*split(q_nope, q_pe, kv, k_pe, s_, seqlens), out)  # noqa: E731
            return run, out
        kv_bytes = kv.numel() * kv.element_size() + k_pe.numel() * 2
        _B.case(rows, f"mla decode kv {'fp8' if scale is not None else 'bf16'}{'' if form is None else ' ' + form} "
                f"split {splits}",
                f"B{batch} H{heads} KV{seq_kv} 512+64", build,
                lambda ref_fn=ref_fn, a=(q_nope, q_pe, kv, k_pe, seqlens, scale): (ref_fn, D.ref_mla_decode(*a)),
                1e-2, bytes_=kv_bytes, ref_name="SDPA bf16 (heads as queries)")


def g_grouped_gemm(rows):
    from tilecraft.kernels import grouped_gemm as GG
    dev = _B.STATE["device"]
    cases = _B.pick([(8, 4096, 2048, 512), (64, 4096, 2048, 128), (16, 7168, 2048, 256)], [(8, 2048, 1024, 256)],
                    [(4, 128, 64, 40)])
    for groups, N, K, mean_m in cases:
        gen = torch.Generator().manual_seed(groups)
        sizes = torch.randint(mean_m // 2, mean_m * 3 // 2 + 1, (groups,), generator=gen)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)]).to(torch.int32).to(dev)
        total = int(offsets[-1])
        a, b = _B.rand(total, K, dtype=torch.bfloat16), _B.rand(groups, N, K, dtype=torch.bfloat16)
        bounds = offsets.tolist()

        def loop(a=a, b=b, bounds=bounds):
            return torch.cat([a[bounds[g]:bounds[g + 1]] @ b[g].t() for g in range(len(bounds) - 1)])
        cands = [("torch loop", loop)]
        if hasattr(torch, "_grouped_mm") and not _B.on_cpu():
            bt = b.transpose(1, 2)   # [G, K, N] view of nn.Linear weights
            cands.append(("torch._grouped_mm", lambda a=a, bt=bt, ends=offsets[1:]: torch._grouped_mm(a, bt, offs=ends)))
            try:
                cands[-1][1]()
            except Exception:  # noqa: BLE001 - not supported on this build / GPU
                cands.pop()
        if not _B.on_cpu():
            # the loop's GPU time alone (its launches replayed from a CUDA graph): the eager loop's own time is
            # mostly the host's and moved 0.16 -> 0.28 ms between two H200 machines (session 27)
            loop()
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                loop()
            cands.append(("torch loop (CUDA graph)", graph.replay))
        ref_name, ref_fn = _B.fastest_torch(cands)
        c = torch.empty(total, N, dtype=torch.bfloat16, device=dev)
        # issue 25's goal is stated against the torch loop: a row against it too when the fastest is another
        refs = [(ref_name, ref_fn)] + ([cands[0]] if ref_name != cands[0][0] else [])

        # the kernel's default 128x128 on two warpgroups first (the row against the torch loop too), then
        # 64x128 on one (fewer rows wasted on each group's last tile) and 128x256
        tiles_cfgs = [dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256)]
        if not _B.on_cpu():
            tiles_cfgs.append(dict(block_M=64, block_N=128, block_K=64, num_stages=3, threads=128))
            tiles_cfgs.append(dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256))
        for cfg in tiles_cfgs:
            def build(a=a, b=b, offsets=offsets, c=c, total=total, N=N, K=K, groups=groups, cfg=cfg):
                kern = GG.grouped_matmul(total, N, K, groups, trans_B=True, dtype="bfloat16", **cfg)
                tiles = GG.tile_offsets(offsets, cfg["block_M"])
                c.fill_(float("nan"))
                return (lambda: kern(a, b, offsets, tiles, c)), c
            tile = f"{cfg['block_M']}x{cfg['block_N']}x{cfg['block_K']}/{cfg['num_stages']}/{cfg['threads']}"
            for name, fn in (refs if cfg is tiles_cfgs[0] else refs[:1]):
                _B.case(rows, f"grouped gemm bf16 {groups} groups {tile}", f"N{N} K{K} M~{mean_m}/group", build,
                        lambda fn=fn, a=a, b=b, offsets=offsets: (fn, GG.ref_grouped_gemm(a, b, offsets, True)),
                        1e-2, flops=2 * total * N * K, ref_name=name)


_B = None   # the bench module (register)


def register(bench) -> dict:
    """{group name: g(rows)}, using `bench`'s helpers (case, rand, pick, STATE, ...)."""
    global _B
    _B = bench
    return {"attention_bwd": g_attention_bwd, "fp8_gemm": g_fp8_gemm, "decode": g_decode,
            "grouped_gemm": g_grouped_gemm}

"""Which lowering of TileLang's example_mha_bwd_bhsd.py (the corpus) gives a wrong dK/dQ: its three
kernels compiled for the given target / pass configs, against torch autograd on fresh inputs.
    python scripts/repro/fa_bwd_paths.py CORPUS_DIR [cpu]"""
import os, sys, json
import tilecraft.compat; tilecraft.compat.install()
import torch
corpus = sys.argv[1]
sys.path.insert(0, os.path.join(corpus, "examples", "flash_attention"))
import example_mha_bwd_bhsd as ex
import tilecraft as tl

cpu = len(sys.argv) > 2 and sys.argv[2] == "cpu"
dev = "cpu" if cpu else "cuda"
B, H, S, D = (1, 1, 128, 64) if cpu else (2, 4, 512, 64)
torch.manual_seed(0)
q, k, v, do = (torch.randn(B, H, S, D, dtype=torch.half, device=dev) for _ in range(4))
qf, kf, vf = (t.float().requires_grad_() for t in (q, k, v))
o_ref = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf)
o_ref.backward(do.float())
variants = {"cpu": ("cpu", {})} if cpu else {
    "sm90a-default": ({"kind": "cuda", "arch": "sm_90a"}, {}),
    "sm90a-sync-wgmma": ({"kind": "cuda", "arch": "sm_90a"}, {"tc.wgmma_async": False}),
    "sm90a-no-wgmma": ({"kind": "cuda", "arch": "sm_90a"}, {"tl.disable_wgmma": True}),
    "sm90a-no-tma-ws": ({"kind": "cuda", "arch": "sm_90a"}, {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}),
    "sm80": ({"kind": "cuda", "arch": "sm_80"}, {}),
}
for name, (target, pc) in variants.items():
    try:
        fwd = tl.compile(ex.flashattn_fwd.fn(B, H, S, D, False, 64, 64) if hasattr(ex.flashattn_fwd, "fn") else None,
                         out_idx=[3, 4], target=target, pass_configs=pc)
        prep = tl.compile(ex.flashattn_bwd_preprocess.fn(B, H, S, D), out_idx=[2], target=target, pass_configs=pc)
        bwd = tl.compile(ex.flashattn_bwd.fn(B, H, S, D, False, 64, 64), target=target, pass_configs=pc)
        post = tl.compile(ex.flashattn_bwd_postprocess.fn(B, H, S, D), out_idx=[1], target=target, pass_configs=pc)
        o, lse = fwd(q, k, v)
        delta = prep(o, do)
        dq = torch.zeros(B, H, S, D, dtype=torch.float32, device=dev)
        dk, dv = torch.empty_like(q), torch.empty_like(q)
        bwd(q, k, v, do, lse, delta, dq, dk, dv)
        dq16 = post(dq)
        err = {n: float((a.float() - r).abs().max()) for n, a, r in
               (("O", o, o_ref), ("dQ", dq16, qf.grad), ("dK", dk, kf.grad), ("dV", dv, vf.grad))}
        print(name, json.dumps({n: round(e, 4) for n, e in err.items()}), "OK" if max(err.values()) < 0.05 else "WRONG")
    except Exception as e:  # noqa: BLE001
        print(name, "ERROR", type(e).__name__, str(e)[:300])

"""TileLang's two corpus programs that read fragments in another layout / in column windows, at small
sizes, each against its own reference: deepseek_mhc/example_mhc_pre.py (mHC pre-block: window reads,
a branch of whole warps) and deepseek_mla/example_mla_decode_persistent.py (persistent MLA decode:
covering reads under a block-uniform `if`, T.sync_grid).  Small enough to run under
compute-sanitizer; on a machine without a GPU it runs on the CPU target (the reference).

    python scripts/repro/remap_corpus_small.py [CORPUS_DIR]   (default: $COMPAT_CORPUS, ../shared/tilelang-examples
                                                              or ./compat_corpus beside this checkout)
    compute-sanitizer --tool racecheck --report-api-errors no python scripts/repro/remap_corpus_small.py

Prints one line per case and exits 1 when any case fails."""
from __future__ import annotations

import os
import sys
import types

import torch

import tilecraft.compat

_REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CORPUS = (sys.argv[1] if len(sys.argv) > 1 else os.environ.get("COMPAT_CORPUS")
          or next((d for d in (os.path.join(_REPO, "..", "shared", "tilelang-examples"), os.path.join(_REPO, "compat_corpus"))
                   if os.path.isdir(os.path.join(d, "examples"))), "."))
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def load(rel, patch=lambda s: s):
    path = os.path.join(CORPUS, "examples", rel)
    mod = types.ModuleType(os.path.basename(rel)[:-3])
    mod.__file__ = path
    exec(compile(patch(open(path).read()), path, "exec"), mod.__dict__)
    return mod


def mhc_cases():
    m = load("deepseek_mhc/example_mhc_pre.py", lambda s: s.replace('device = "cuda"', f'device = "{DEVICE}"'))
    for n, hidden in [(64, 1280), (37, 512), (130, 2560)]:
        yield f"mhc_pre n={n} hidden={hidden}", lambda n=n, hidden=hidden: m.test(n=n, hidden_size=hidden, hc_mult=4)


def mla_cases():
    if "einops" not in sys.modules:
        try:
            import einops  # noqa: F401
        except ImportError:  # the program imports it; this check uses its own torch reference
            sys.modules["einops"] = types.ModuleType("einops")
            sys.modules["einops"].rearrange = sys.modules["einops"].einsum = None
    m = load("deepseek_mla/example_mla_decode_persistent.py")
    if DEVICE == "cpu":
        m.driver.get_num_sms = lambda *a: 3

    def run(batch, heads, ctx, dim, pe, split):
        k = m.flashattn(batch, heads, 1, ctx, dim, pe, 64, 64, split)
        g = torch.Generator().manual_seed(batch * 1000 + ctx)
        q, qpe = (torch.randn(batch, heads, d, generator=g).half() for d in (dim, pe))
        kv, kpe = (torch.randn(batch, ctx, 1, d, generator=g).half() for d in (dim, pe))
        glse = torch.randn(batch, heads, split, generator=g).half()
        partial = torch.randn(batch, heads, split, dim, generator=g).half()
        out = k(*(t.to(DEVICE) for t in (q, qpe, kv, kpe, glse, partial))).float().cpu()
        s = torch.cat([q, qpe], -1).float() @ torch.cat([kv, kpe], -1).float()[:, :, 0].transpose(1, 2)
        ref = torch.softmax(s / (dim + pe) ** 0.5, -1) @ kv.float()[:, :, 0]
        torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2)
    for args in [(2, 64, 256, 128, 32, 2), (5, 128, 512, 512, 64, 2)]:
        yield f"mla_decode_persistent {args}", lambda args=args: run(*args)


def main():
    tilecraft.compat.install()
    failed = 0
    for name, case in [*mhc_cases(), *mla_cases()]:
        try:
            case()
            print(f"PASS {name} ({DEVICE})", flush=True)
        except Exception as e:  # noqa: BLE001 - report every case
            failed += 1
            print(f"FAIL {name} ({DEVICE}): {type(e).__name__}: {str(e).splitlines()[0][:300]}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

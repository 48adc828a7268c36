"""The sanitizer set: one small launch of a representative kernel for every lowering path, and a
sample of the GPU tier's fuzzed programs on every CUDA variant, each checked against torch.

scripts/sanitize.sh runs this file under compute-sanitizer's memcheck, racecheck, synccheck and
initcheck (sanitizers slow kernels 10-100x, so shapes are small: ragged, a few blocks, one launch
per kernel).  Paths covered, each asserted from the kernel's plan so the set cannot drift off them:
sm_80 code (mma.sync GEMM, cp.async pipelines; compiled for the GPU's own plain arch), and on
sm_90a: async wgmma with TMA loads on mbarriers (the Hopper defaults), the persistent tile walk, warp-specialized GEMM and
FlashAttention (a producer warpgroup), wgmma with A from registers (FlashAttention's P @ V), the
mbarrier pipeline on mma.sync; split-K atomics, reductions (softmax, RMSNorm), element-wise.
TILECRAFT_SANITIZE_FUZZ sets how many fuzzed programs (default 64, from the GPU tier's first
seed) run on every variant.  As a plain GPU test it takes well under a minute.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re

import pytest

torch = pytest.importorskip("torch")

import tilecraft  # noqa: E402
import tilecraft.kernels as K  # noqa: E402

pytestmark = pytest.mark.gpu

# path -> (needs sm_90a, pass_configs, words the plan of a GEMM on this path must contain)
PATHS = {
    "sm80": (False, {}, ("mma.sync", "cp.async")),
    "sm90a": (True, {}, ("wgmma", "TMA")),
    "sm90a-ws": (True, {"tc.warp_specialize": True}, ("wgmma", "warp-specialized")),
    "sm90a-mbarrier": (True, {"tc.mbarrier_pipeline": True, "tl.disable_wgmma": True}, ("mma.sync", "mbarrier")),
}
PERSISTENT = (True, {"tc.persistent_tiles": True}, ("wgmma", "persistent"))  # needs more tiles than SMs: own test


def _own_name(func, tag: str = ""):
    """The kernels of the set are all `main` as written: each gets the test's id (and `tag`) as its
    name, so the sanitizer's per-kernel table tells them apart."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[-1].split(" ")[0]
    name = re.sub(r"\W+", "_", f"{test}_{tag}" if tag else test).strip("_")
    return dataclasses.replace(func, name=name) if name else func


def _compile(func, path: str, out_idx=(-1,), tag: str = ""):
    func = _own_name(func, tag)
    hopper, configs, _ = PERSISTENT if path == "sm90a-persistent" else PATHS[path]
    major, minor = torch.cuda.get_device_capability()
    if hopper and (major, minor) != (9, 0):
        pytest.skip(f"{path} needs an sm_90a GPU")
    arch = f"sm_{major}{minor}" + ("a" if hopper else "")
    return tilecraft.compile(func, out_idx=list(out_idx) if out_idx else None,
                             target={"kind": "cuda", "arch": arch}, pass_configs=configs)


def _plan(kernel) -> str:
    return " | ".join(kernel.artifact.meta.get("plan", []))


def _rand(*shape, dtype=torch.float16):
    return torch.randn(*shape, device="cuda").to(dtype)


def _rel(out, ref) -> float:
    out, ref = out.double(), ref.double()
    assert torch.isfinite(out).all()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


# (M, N, K, trans_A, trans_B, dtype, tile config): ragged sizes whose rows are 16-byte multiples
# (TMA can load them), one and two warpgroups
GEMMS = {
    "64x64x32": (200, 136, 200, False, False, "float16", dict(block_M=64, block_N=64, block_K=32, num_stages=3)),
    "tt-bf16": (136, 200, 72, True, True, "bfloat16", dict(block_M=64, block_N=64, block_K=32, num_stages=2)),
    "2wg": (256, 264, 192, False, False, "float16",
            dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256)),
    # the README's tile: on sm_90a split as two blocks per SM by default (transform/pipelining/warp_specialized.py)
    "readme": (264, 200, 200, False, False, "float16",
               dict(block_M=128, block_N=128, block_K=32, num_stages=3, threads=128)),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", GEMMS)
def test_gemm(case, path):
    m, n, k, ta, tb, dtype, cfg = GEMMS[case]
    kernel = _compile(K.matmul.get_tir(m, n, k, trans_A=ta, trans_B=tb, dtype=dtype, **cfg), path)
    assert all(w in _plan(kernel) for w in PATHS[path][2]), _plan(kernel)
    if case == "readme" and path.startswith("sm90a") and path != "sm90a-mbarrier":
        assert "two blocks per SM" in _plan(kernel), _plan(kernel)
    td = getattr(torch, dtype)
    a, b = _rand(*((k, m) if ta else (m, k)), dtype=td), _rand(*((n, k) if tb else (k, n)), dtype=td)
    c = kernel(a, b)
    ref = (a.double().t() if ta else a.double()) @ (b.double().t() if tb else b.double())
    assert _rel(c, ref) < 1e-2


@pytest.mark.parametrize("path", ["sm80", "sm90a"])
def test_gemm_bias_gelu(path):
    m, n, k = 200, 136, 72
    kernel = _compile(K.matmul_bias_gelu.get_tir(m, n, k, block_M=64, block_N=64, block_K=32), path)
    a, b, bias = _rand(m, k), _rand(k, n), _rand(n)
    x = a.double() @ b.double() + bias.double()
    ref = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    assert _rel(kernel(a, b, bias), ref) < 1e-2


def test_persistent_walk_with_bias_gelu():
    """Blocks walking 144 ragged tiles (9 x 16 over 132 blocks, the last row and column of tiles partly out
    of range), the TMA ring running across tiles, a bias tile refilled per tile, the GELU epilogue."""
    m, n, k = 1100, 4000, 200
    kernel = _compile(K.matmul_bias_gelu.get_tir(m, n, k, 128, 256, 64, 3, 256), "sm90a-persistent")
    assert all(w in _plan(kernel) for w in PERSISTENT[2]), _plan(kernel)
    a, b, bias = _rand(m, k), _rand(k, n), _rand(n)
    x = a.double() @ b.double() + bias.double()
    ref = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    assert _rel(kernel(a, b, bias), ref) < 1e-2


@pytest.mark.parametrize("path", ["sm80", "sm90a"])
def test_splitk_atomics(path):
    m, n, k = 136, 136, 256
    kernel = _compile(K.splitk_matmul.get_tir(m, n, k, split_k=2), path, out_idx=None)
    a, b = _rand(m, k), _rand(k, n)
    c = torch.zeros(m, n, device="cuda")
    kernel(a, b, c)
    assert _rel(c, a.double() @ b.double()) < 1e-4


# (batch, heads, seq, dim, causal, tile config, plan words on sm_90a)
ATTENTION = {
    "d64-causal": (1, 2, 200, 64, True, {}, ("A from registers",)),
    "d128-ws": (1, 2, 200, 128, False, dict(block_M=128, block_N=128, num_stages=2, threads=256),
                ("A from registers", "warp-specialized")),
    "d128-ws-causal": (1, 2, 200, 128, True, dict(block_M=128, block_N=128, num_stages=2, threads=256),
                       ("A from registers", "warp-specialized")),
    "d128-overlap-causal": (1, 2, 520, 128, True, dict(block_M=128, block_N=128, num_stages=3, threads=256),
                            ("second gemm runs",)),
}


@pytest.mark.parametrize("path", ["sm80", "sm90a"])
@pytest.mark.parametrize("case", ATTENTION)
def test_flash_attention(case, path):
    b, h, s, d, causal, cfg, words = ATTENTION[case]
    kernel = _compile(K.flash_attention.get_tir(b, h, s, d, is_causal=causal, **cfg), path)
    if path != "sm80":
        assert all(w in _plan(kernel) for w in words), _plan(kernel)
    q, k, v = (_rand(b, s, h, d) for _ in range(3))
    qt, kt, vt = (t.transpose(1, 2).double() for t in (q, k, v))
    scores = qt @ kt.transpose(-1, -2) / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(~torch.ones(s, s, dtype=torch.bool, device="cuda").tril(), float("-inf"))
    assert _rel(kernel(q, k, v), (scores.softmax(-1) @ vt).transpose(1, 2)) < 1e-2


def test_reductions_and_elementwise():
    x = _rand(37, 1000) * 3
    assert _rel(_compile(K.softmax.get_tir(37, 1000), "sm80", tag="softmax")(x), x.double().softmax(-1)) < 1e-2
    xb, w = _rand(37, 768, dtype=torch.bfloat16), _rand(768, dtype=torch.bfloat16)
    xd = xb.double()
    ref = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
    assert _rel(_compile(K.rmsnorm.get_tir(37, 768), "sm80", tag="rmsnorm")(xb, w), ref) < 1e-2
    a, b = _rand(1000, dtype=torch.float32), _rand(1000, dtype=torch.float32)
    assert _rel(_compile(K.vector_add.get_tir(1000), "sm80", tag="vector_add")(a, b), a.double() + b.double()) < 1e-7
    p, q = _rand(100, 77), _rand(100, 77)
    assert _rel(_compile(K.axpby.get_tir(100, 77), "sm80", tag="axpby")(p, q), 2.0 * p.double() - 0.5 * q.double()) < 1e-2


def test_fuzzed_programs_on_every_variant(tmp_path):
    """The GPU tier's first fuzz seed, built in this process (no worker processes under the
    sanitizer), each program launched once per variant and compared with torch and the CPU."""
    from tilecraft.testing.fuzz import check
    from tilecraft.testing.fuzz_report import Report
    n = int(os.environ.get("TILECRAFT_SANITIZE_FUZZ", "64"))
    report = Report()
    check([(2001, i) for i in range(n)], "cuda", report, str(tmp_path), jobs=1)
    gpu_rows = {t: r for t, r in report.totals().items() if t.startswith("gpu ")}
    assert gpu_rows and all(r["compared"] > 0 for r in gpu_rows.values()), report.table()
    assert not report.failures, "\n".join(f"{n} on {t}: {w.splitlines()[0][:300]}" for t, (_, _, n), w in
                                          report.failures)

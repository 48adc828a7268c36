"""Hash the generated source of many kernels, to prove a refactor leaves generated code byte-identical.

    .venv/bin/python scripts/source_hashes.py > /tmp/before.txt     # on the old commit
    .venv/bin/python scripts/source_hashes.py > /tmp/after.txt      # after the change
    diff /tmp/before.txt /tmp/after.txt                              # must print nothing

Two sets of kernels, each printed as one `name target hash` line (sha256 of the source, 16 hex
digits; `error:<hash of the message>` when generation fails, so a changed error shows too):

- the reference kernels of `tilecraft/kernels` in every GEMM loop form (default, per-stage
  mbarriers, wgmma, async wgmma, async wgmma + TMA; trans_A/trans_B; GEMM+bias+GELU, split-K),
  FlashAttention (full, causal, with wgmma), softmax, rmsnorm, elementwise, for the CPU,
  sm_80 and sm_90a (plus the Hopper options on sm_90a);
- with `--tests` (slower), every program the CPU-tier tests compile (tests/cpu): pytest runs them
  with compilation replaced by source generation for cpu, sm_80 and sm_90a (nothing is compiled
  or run; each such test is skipped once its sources are hashed).

Only the passes and printers run (no NVRTC, no g++), so it takes seconds, not minutes.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TARGETS = {"cpu": "cpu", "sm_80": {"kind": "cuda", "arch": "sm_80"}, "sm_90a": {"kind": "cuda", "arch": "sm_90a"}}
HOPPER = {
    "wgmma": {"tc.use_wgmma": True},
    "wgmma_async": {"tc.use_wgmma": True, "tc.wgmma_async": True},
    "wgmma_tma": {"tc.use_wgmma": True, "tc.wgmma_async": True, "tc.use_tma": True},
}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def generate(func, target, configs=None) -> str:
    """The source `build` would compile for `func` (no compiler is run)."""
    from tilecraft.compiler.build import check_pass_configs
    from tilecraft.target import Target
    from tilecraft.transform.pipeline import run_pipeline
    tgt = Target.resolve(target)
    lowered = run_pipeline(func.with_attr("pass_configs", check_pass_configs(configs)), tgt)
    if tgt.kind == "cpu":
        from tilecraft.codegen.cpp import generate_cpp
        return generate_cpp(lowered)
    from tilecraft.codegen.cuda import generate_cuda
    source, meta = generate_cuda(lowered, tgt, configs)
    return source + "\n// meta: " + repr(sorted((k, repr(v)) for k, v in meta.items()))


def hash_of(func, target, configs=None) -> str:
    try:
        return digest(generate(func, target, configs))
    except Exception as e:  # noqa: BLE001 - a failure is a result to compare too
        return "error:" + digest(f"{type(e).__name__}: {e}")


def reference_kernels():
    """(name, func factory, configs per target) for the reference kernels."""
    from tilecraft.kernels import attention, elementwise, gemm, norm
    out = []
    for form, configs in [("default", {}), ("mbarrier", {"tc.mbarrier_pipeline": True}), *HOPPER.items(),
                          ("tma_only", {"tc.use_tma": True})]:
        for shape in [(1024, 1024, 1024), (1000, 1000, 1000), (512, 768, 256)]:
            for bk, st in [(32, 3), (64, 4), (32, 2)]:
                out.append((f"matmul{shape}-bk{bk}-s{st}-{form}",
                            lambda s=shape, bk=bk, st=st: gemm.matmul.fn(*s, block_K=bk, num_stages=st), configs))
        out.append((f"matmul_tA_tB-{form}",
                    lambda: gemm.matmul.fn(512, 512, 512, trans_A=True, trans_B=True), configs))
        out.append((f"matmul_tB-{form}", lambda: gemm.matmul.fn(512, 512, 512, trans_B=True), configs))
        out.append((f"matmul_bf16_256x128-{form}",
                    lambda: gemm.matmul.fn(2048, 2048, 2048, block_M=128, block_N=256, block_K=64, dtype="bfloat16",
                                           threads=256), configs))
        out.append((f"matmul_bias_gelu-{form}", lambda: gemm.matmul_bias_gelu.fn(1024, 1024, 512), configs))
        out.append((f"splitk-{form}", lambda: gemm.splitk_matmul.fn(512, 512, 1024), configs))
        for causal in (False, True):
            out.append((f"flash_d64_causal{causal}-{form}",
                        lambda c=causal: attention.flash_attention.fn(1, 2, 512, 64, is_causal=c, block_M=64,
                                                                      block_N=64, num_stages=2), configs))
            out.append((f"flash_d128_causal{causal}-{form}",
                        lambda c=causal: attention.flash_attention.fn(1, 2, 1024, 128, is_causal=c, block_M=128,
                                                                      block_N=64, num_stages=2), configs))
    for name, fn in [("softmax", lambda: norm.softmax.fn(4096, 1024)),
                     ("softmax_ragged", lambda: norm.softmax.fn(1000, 1000)),
                     ("rmsnorm", lambda: norm.rmsnorm.fn(4096, 1024)),
                     ("rmsnorm_ragged", lambda: norm.rmsnorm.fn(999, 1000)),
                     ("vector_add", lambda: elementwise.vector_add.fn(100000)),
                     ("axpby", lambda: elementwise.axpby.fn(1000, 1000))]:
        out.append((name, fn, {}))
    return out


def main_reference():
    seen = set()
    for name, fn, configs in reference_kernels():
        for tname, target in TARGETS.items():
            if configs and tname == "cpu":
                continue  # the options are CUDA's; the CPU source is the default one
            key = (name, tname)
            if key in seen:
                continue
            seen.add(key)
            try:
                func = fn()
            except Exception as e:  # noqa: BLE001
                print(f"{name} {tname} factory-error:{digest(str(e))}")
                continue
            print(f"{name} {tname} {hash_of(func, target, configs)}")


_PLUGIN = '''
import pytest, sys, importlib
J = importlib.import_module("tilecraft.jit")  # the module (tilecraft.jit the attribute is the decorator)
sys.path.insert(0, {root!r})
from scripts.source_hashes import hash_of, TARGETS, HOPPER
_count = {{}}
def _fake_build(func, tgt, pass_configs=None):
    node = _current[0]
    n = _count.get(node, 0)
    _count[node] = n + 1
    with open({out!r}, "a") as f:
        for tname, target in TARGETS.items():
            f.write(f"{{node}}#{{n}}:{{func.name}} {{tname}} {{hash_of(func, target, pass_configs)}}\\n")
        if any(w in node.lower() for w in ("gemm", "attention", "flash")):
            for form, cfg in HOPPER.items():
                f.write(f"{{node}}#{{n}}:{{func.name}} sm_90a-{{form}} {{hash_of(func, TARGETS['sm_90a'], {{**(pass_configs or {{}}), **cfg}})}}\\n")
    pytest.skip("source hashed")
_current = [None]
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _current[0] = item.nodeid
J.build = _fake_build
'''


def main_tests():
    """Hash every CPU-tier test program's sources (cpu param only: the sources are target-independent inputs)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "hashes.txt")
        open(out, "w").close()
        with open(os.path.join(tmp, "srchash_plugin.py"), "w") as f:
            f.write(_PLUGIN.format(root=ROOT, out=out))
        env = dict(os.environ, PYTHONPATH=tmp + os.pathsep + ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   TILECRAFT_CACHE_DIR=os.path.join(tmp, "cache"))
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "srchash_plugin",
                        "-k", "cpu and not cuda", "tests/cpu", "-x", "--no-header", "-rN"],
                       cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            lines = sorted(set(f.read().splitlines()))
    for line in lines:
        print(line)


if __name__ == "__main__":
    main_reference()
    if "--tests" in sys.argv:
        main_tests()

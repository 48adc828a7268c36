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
- sm_90a as `build` compiles it (`sm_90a-defaults`: the target's own defaults applied,
  Target.pass_config_defaults, i.e. the Hopper path) for every reference kernel, and the
  warp-specialized GEMM loop (`tc.warp_specialize: True`) at 128x128x32/3/128 and 128x256x64/3/256;
- with `--tests` (slower), every program the CPU-tier tests compile (tests/cpu): pytest runs them
  with compilation replaced by source generation for cpu, sm_80 and sm_90a, sm_90a with its defaults,
  and the Hopper options for GEMM/attention tests (nothing is compiled or run; each such test is
  skipped once its sources are hashed).

`SOURCE_HASHES_WITHOUT=key,key` leaves those launch-metadata keys out of every hash: a comparison
with a checkout from before a key existed (`grid_exprs`, the launch record's grid trees, beside the
`grid` text every checkout has) then shows whether anything else changed.

`TILECRAFT_ROOT=<checkout>` hashes another checkout with this file (e.g. one from before the
script existed), by default the checkout this file lives in.

Only the passes and printers run (no NVRTC, no g++), so it takes seconds, not minutes.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.environ.get("TILECRAFT_ROOT") or os.path.dirname(HERE))
sys.path.insert(0, ROOT)

TARGETS = {"cpu": "cpu", "sm_80": {"kind": "cuda", "arch": "sm_80"}, "sm_90a": {"kind": "cuda", "arch": "sm_90a"}}
HOPPER = {
    "wgmma": {"tc.use_wgmma": True},
    "wgmma_async": {"tc.use_wgmma": True, "tc.wgmma_async": True},
    "wgmma_tma": {"tc.use_wgmma": True, "tc.wgmma_async": True, "tc.use_tma": True},
}
WS = {"tc.warp_specialize": True}  # with the target's defaults: the producer/consumer split wherever it applies


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def generate(func, target, configs=None, defaults=False) -> str:
    """The source for `func` (no compiler is run): with `defaults`, exactly what `build` compiles
    (the target's pass_config defaults under the given configs); without, `configs` alone."""
    from tilecraft.compiler.build import check_pass_configs
    from tilecraft.target import Target
    from tilecraft.transform.pipeline import run_pipeline
    tgt = Target.resolve(target)
    configs = check_pass_configs(configs)
    if defaults:
        configs = {**tgt.pass_config_defaults(configs), **configs}
    if hasattr(func, "with_attr"):   # a checkout from before the pass context (options in PrimFunc.attrs)
        lowered = run_pipeline(func.with_attr("pass_configs", configs), tgt)
    else:
        lowered = run_pipeline(func, tgt, configs)
    if tgt.kind == "cpu":
        from tilecraft.codegen.cpp import generate_cpp
        return generate_cpp(lowered)
    from tilecraft.codegen.cuda import generate_cuda
    source, meta = generate_cuda(lowered, tgt, configs)
    if hasattr(meta, "to_meta"):   # a launch record (tilecraft/launch.py); older checkouts return the dict
        meta = meta.to_meta()
    without = set(filter(None, os.environ.get("SOURCE_HASHES_WITHOUT", "").split(",")))
    meta = {k: v for k, v in meta.items() if k not in without}
    return source + "\n// meta: " + repr(sorted((k, repr(v)) for k, v in meta.items()))


def hash_of(func, target, configs=None, defaults=False) -> str:
    try:
        return digest(generate(func, target, configs, defaults))
    except Exception as e:  # noqa: BLE001 - a failure is a result to compare too
        # the message may name a file of the checkout (a test's kernel): compare it checkout-free
        return "error:" + digest(f"{type(e).__name__}: {e}".replace(ROOT, "<root>"))


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


def hopper_gemms():
    """(name, func factory) of the GEMMs whose sm_90a loop forms are compared under the target's
    defaults (the TMA + async wgmma loop) and with warp specialization forced."""
    from tilecraft.kernels import gemm
    out = []
    for shape in [(4096, 4096, 4096), (1000, 776, 520), (512, 512, 512)]:
        for bm, bn, bk, st, th in [(128, 128, 32, 3, 128), (128, 256, 64, 3, 256), (128, 128, 64, 3, 256)]:
            out.append((f"matmul{shape}-{bm}x{bn}x{bk}-s{st}-t{th}",
                        lambda s=shape, c=(bm, bn, bk, st, th): gemm.matmul.fn(*s, *c[:3], num_stages=c[3],
                                                                                threads=c[4])))
    out.append(("matmul_bf16_128x256x64-s3-t256",
                lambda: gemm.matmul.fn(2048, 2048, 2048, 128, 256, 64, num_stages=3, threads=256, dtype="bfloat16")))
    out.append(("matmul_tB_128x256x64-s3-t256",
                lambda: gemm.matmul.fn(2048, 2048, 2048, 128, 256, 64, num_stages=3, threads=256, trans_B=True)))
    out.append(("matmul_bias_gelu_128x256x64-s3-t256",
                lambda: gemm.matmul_bias_gelu.fn(2048, 2048, 2048, 128, 256, 64, num_stages=3, threads=256)))
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
            if tname == "sm_90a" and not configs:
                print(f"{name} sm_90a-defaults {hash_of(func, target, None, defaults=True)}")
    for name, fn in hopper_gemms():
        func = fn()
        print(f"{name} sm_90a-defaults {hash_of(func, TARGETS['sm_90a'], None, defaults=True)}")
        print(f"{name} sm_90a-ws {hash_of(func, TARGETS['sm_90a'], WS, defaults=True)}")


_PLUGIN = '''
import pytest, sys, importlib
J = importlib.import_module("tilecraft.jit")  # the module (tilecraft.jit the attribute is the decorator)
sys.path.insert(0, {root!r})
sys.path.insert(0, {here!r})
from source_hashes import hash_of, TARGETS, HOPPER, WS
_count = {{}}
def _fake_build(func, tgt, pass_configs=None):
    node = _current[0]
    n = _count.get(node, 0)
    _count[node] = n + 1
    with open({out!r}, "a") as f:
        for tname, target in TARGETS.items():
            f.write(f"{{node}}#{{n}}:{{func.name}} {{tname}} {{hash_of(func, target, pass_configs)}}\\n")
        f.write(f"{{node}}#{{n}}:{{func.name}} sm_90a-defaults {{hash_of(func, TARGETS['sm_90a'], pass_configs, True)}}\\n")
        if any(w in node.lower() for w in ("gemm", "attention", "flash")):
            for form, cfg in HOPPER.items():
                f.write(f"{{node}}#{{n}}:{{func.name}} sm_90a-{{form}} {{hash_of(func, TARGETS['sm_90a'], {{**(pass_configs or {{}}), **cfg}})}}\\n")
            f.write(f"{{node}}#{{n}}:{{func.name}} sm_90a-ws {{hash_of(func, TARGETS['sm_90a'], {{**(pass_configs or {{}}), **WS}}, True)}}\\n")
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
            f.write(_PLUGIN.format(root=ROOT, here=HERE, out=out))
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

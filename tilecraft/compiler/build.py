"""From a parsed `PrimFunc` to a loadable artifact, through the disk cache.

`build(func, target, pass_configs)` runs the target's pass pipeline, generates the source,
compiles it, and keeps every stage's output (IR before/after, source, binary, metadata) in one
cache entry keyed by the program text, the target, the options, the C++/CUDA compiler and its
version, the device headers and tilecraft's own source hash (`cache.kernel_cache_key`), so a
changed or different compiler never serves a stale kernel.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from .. import env
from ..ir.func import PrimFunc
from .cache import DiskCache, kernel_cache_key

# TileLang pass-config keys we honour (or accept as no-ops where the feature doesn't apply).
KNOWN_PASS_CONFIGS = {
    "tl.disable_tma_lower", "tl.disable_warp_specialized", "tl.enable_fast_math",
    "tl.disable_fast_math", "tl.disable_safe_memory_legalize", "tl.disable_dynamic_tail_split",
    "tl.dynamic_alignment", "tl.config_index_bitwidth", "tl.disable_vectorize_256",
    "tl.enable_aggressive_shared_memory_merge", "tl.debug_merge_shared_memory_allocations",
    "tl.disable_thread_storage_sync", "tl.ptxas_register_usage_level", "tl.enable_ptxas_verbose_output",
    "tl.disable_rdc", "tl.disable_wgmma", "tl.disable_cp_async",
    # tilecraft's own Hopper switches (sm_90a; all default on there, Target.pass_config_defaults):
    # wgmma gemms; one wgmma group in flight across a pipelined loop; TMA tile loads; a producer
    # warpgroup issuing them (warp specialization).
    "tc.use_wgmma", "tc.wgmma_async", "tc.use_tma", "tc.warp_specialize",
    # tilecraft's own: stage gemm accumulator stores through shared memory (default on).
    "tc.stage_epilogue",
    # tilecraft's own: per-stage mbarriers in GEMM main loops (opt-in; pipeline_copies.py says why).
    "tc.mbarrier_pipeline",
}


@dataclass
class Artifact:
    """Everything needed to run a compiled kernel, as stored in (and read from) the cache."""
    target: object
    source: str
    meta: dict
    ir: str = ""
    lowered_ir: str = ""
    binary: bytes = b""
    binary_path: str = ""
    from_cache: bool = False
    compile_seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def check_pass_configs(pass_configs) -> dict:
    """The kernel's pass_configs over the environment's defaults (TILECRAFT_PASS_CONFIGS), checked."""
    defaults = env.default_pass_configs()
    unknown = sorted(k for k in defaults if k not in KNOWN_PASS_CONFIGS)
    if unknown:
        raise ValueError(f"TILECRAFT_PASS_CONFIGS: unknown key(s) {unknown}; known keys: {sorted(KNOWN_PASS_CONFIGS)}")
    configs = dict(pass_configs or {})
    unknown = sorted(k for k in configs if k not in KNOWN_PASS_CONFIGS)
    if unknown:
        raise ValueError(f"unknown pass_configs key(s) {unknown}; known keys: {sorted(KNOWN_PASS_CONFIGS)}")
    return {**defaults, **configs}


def build(func: PrimFunc, target, pass_configs=None) -> Artifact:
    configs = check_pass_configs(pass_configs)
    configs = {**target.pass_config_defaults(configs), **configs}
    ir_text = func.script()
    key = kernel_cache_key(ir_text, target, configs)
    cache = DiskCache("kernels")
    entry = cache.get(key)
    if entry is not None:
        meta = entry.meta
        name = meta["binary_name"]
        return Artifact(target, entry.read_text("source"), meta, ir=ir_text,
                        lowered_ir=entry.read_text("lowered_ir") if "lowered_ir" in entry else "",
                        binary=entry.read(name) if target.kind == "cuda" else b"",
                        binary_path=str(entry.file(name)), from_cache=True)
    t0 = time.perf_counter()
    from ..transform.pipeline import run_pipeline
    lowered = run_pipeline(func.with_attr("pass_configs", configs), target)
    if target.kind == "cpu":
        from ..codegen.cpp import ENTRY, generate_cpp
        from .cxx import compile_cxx
        source = generate_cpp(lowered)
        binary = compile_cxx(source, func.name)
        meta = {"entry": ENTRY, "binary_name": "kernel.so"}
    else:
        from ..codegen.cuda import generate_cuda
        from .cuda import compile_cuda
        source, meta = generate_cuda(lowered, target, configs)
        binary = compile_cuda(source, target, configs, name=f"{func.name}.cu")
        meta["binary_name"] = "kernel.cubin"
    seconds = time.perf_counter() - t0
    meta = dict(meta, kernel=func.name, target=str(target), compile_seconds=seconds)
    if env.print_on_compilation():
        print(f"[tilecraft] compiled {func.name} for {target} in {seconds * 1000:.0f} ms")
        if env.verbose():
            for line in meta.get("plan", []):
                print(f"[tilecraft]   {line}")
    lowered_text = lowered.script()
    stored = cache.put(key, {"source": source, "ir": ir_text, "lowered_ir": lowered_text,
                             meta["binary_name"]: binary, "meta_readable.json": json.dumps(meta, indent=1)}, meta)
    return Artifact(target, source, meta, ir=ir_text, lowered_ir=lowered_text, binary=binary,
                    binary_path=str(stored.file(meta["binary_name"])), compile_seconds=seconds)

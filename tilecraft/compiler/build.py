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
from ..options import _BY_KEY as PASS_CONFIG_FIELDS, Options
from .cache import DiskCache, kernel_cache_key

# Every key (TileLang's and tilecraft's own), its owner and what is done with it: tilecraft/options.py
KNOWN_PASS_CONFIGS = set(PASS_CONFIG_FIELDS)


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


def check_pass_configs(pass_configs, target_kind=None) -> Options:
    """The kernel's pass_configs over the environment's defaults (TILECRAFT_PASS_CONFIGS), checked
    and typed (unknown keys are errors; keys not acted on here warn once, see tilecraft/options.py)."""
    defaults = env.default_pass_configs()
    try:
        Options.make(defaults, warn=False)
    except ValueError as e:
        unknown = sorted(k for k in defaults if str(k) not in KNOWN_PASS_CONFIGS)
        what = f"unknown key(s) {unknown}" if unknown else str(e)
        raise ValueError(f"TILECRAFT_PASS_CONFIGS: {what}; known keys: {sorted(KNOWN_PASS_CONFIGS)}") from None
    given = pass_configs.given if isinstance(pass_configs, Options) else (pass_configs or {}).items()
    return Options.make({**defaults, **dict(given)}, target_kind)


def effective_pass_configs(pass_configs, target) -> Options:
    """The options a kernel is lowered with: the target's defaults under what the program and
    TILECRAFT_PASS_CONFIGS say (sm_90a: the Hopper path)."""
    given = check_pass_configs(pass_configs, target.kind)
    return Options.make({**target.pass_config_defaults(given), **dict(given.given)}, target.kind, warn=False)


def build(func: PrimFunc, target, pass_configs=None) -> Artifact:
    artifact = _build(func, target, pass_configs)
    if target.kind == "cpu":
        from ..compat.cpu_mode import also_compile
        also_compile(func, pass_configs, artifact)   # CPU mode's --also-compile ARCH (else nothing)
    return artifact


def span_token(func: PrimFunc) -> str:
    """The source lines the program's nodes come from, as a digest: the generated code names them
    (a failed allocation, an empty grid, a deadlocked wait in the thread-level mode), and the program
    text (`func.script()`) does not -- a kernel moved down its file must not be served with its old
    line numbers."""
    import hashlib
    from ..ir import collect
    spans = [n.span for n in collect(func.body, lambda n: getattr(n, "span", None) is not None)]
    lines = sorted({(s.file, s.line) for s in [getattr(func, "span", None), *spans] if s is not None})
    return hashlib.sha256(repr(lines).encode()).hexdigest()[:16]


def _build(func: PrimFunc, target, pass_configs=None) -> Artifact:
    if target.kind == "cuda":
        from ..transform.split_kernels import split_kernels
        parts = split_kernels(func)
        if parts:
            return _build_parts(func, parts, target, pass_configs)
    configs = effective_pass_configs(pass_configs, target)
    ir_text = func.script()
    from ..transform.lower_manual_sync_cpu import warn_register_hints
    warn_register_hints(func, target)  # before the cache: a cached kernel warns too
    if target.kind == "cuda" and env.cuda_compiler() == "nvrtc" and configs.device_compile_flags:
        from .nvrtc_flags import nvrtc_flags
        nvrtc_flags(configs.device_compile_flags)   # likewise: the nvcc-only flags NVRTC drops
    from ..engine.callback import apply_cuda_postproc, cache_token as postproc_token
    post = (postproc_token(),) if target.kind == "cuda" and postproc_token() else ()
    key = kernel_cache_key(ir_text, target, {"options": configs.cache_token(), "postproc": post,
                                             "lines": span_token(func)})
    cache = DiskCache("kernels")
    entry = cache.get(key)
    if entry is not None:
        meta = entry.meta
        name = meta["binary_name"]
        if configs.kernels_output_dir:
            _write_source(configs.kernels_output_dir, func.name, target, entry.read_text("source"))
        return Artifact(target, entry.read_text("source"), meta, ir=ir_text,
                        lowered_ir=entry.read_text("lowered_ir") if "lowered_ir" in entry else "",
                        binary=entry.read(name) if target.kind == "cuda" else b"",
                        binary_path=str(entry.file(name)), from_cache=True)
    t0 = time.perf_counter()
    from ..transform.pipeline import run_pipeline
    lowered = run_pipeline(func, target, configs)
    if target.kind == "cpu":
        from ..codegen.cpp import ENTRY, generate_cpp
        from .cxx import compile_cxx
        source = generate_cpp(lowered)
        binary = compile_cxx(source, func.name)
        meta = {"entry": ENTRY, "binary_name": "kernel.so"}
    else:
        from ..codegen.cuda import generate_cuda
        from .cuda import compile_cuda
        source, record = generate_cuda(lowered, target, configs)
        meta = record.to_meta()
        source = apply_cuda_postproc(source, target)  # tilelang.engine.callback hooks, if any
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
    if configs.kernels_output_dir:
        _write_source(configs.kernels_output_dir, func.name, target, source)
    stored = cache.put(key, {"source": source, "ir": ir_text, "lowered_ir": lowered_text,
                             meta["binary_name"]: binary, "meta_readable.json": json.dumps(meta, indent=1)}, meta)
    return Artifact(target, source, meta, ir=ir_text, lowered_ir=lowered_text, binary=binary,
                    binary_path=str(stored.file(meta["binary_name"])), compile_seconds=seconds)


def _build_parts(func: PrimFunc, parts: list, target, pass_configs) -> Artifact:
    """A program of several T.Kernels (transform/split_kernels.py): each part built (and cached) on
    its own; the artifact shows them together and keeps each part's for the launcher."""
    built = [build(p, target, pass_configs) for p in parts]
    source = "\n".join(f"// ---- kernel {i} of {len(built)}: {p.name} ----\n{a.source}"
                       for i, (p, a) in enumerate(zip(parts, built)))
    plan = [f"{p.name}: {line}" for p, a in zip(parts, built) for line in a.meta.get("plan", [])]
    meta = {"kernel": func.name, "target": str(target), "plan": plan, "parts": [p.name for p in parts],
            "compile_seconds": sum(a.compile_seconds for a in built)}
    return Artifact(target, source, meta, ir=func.script(),
                    lowered_ir="\n".join(a.lowered_ir for a in built),
                    from_cache=all(a.from_cache for a in built), compile_seconds=meta["compile_seconds"],
                    extra={"parts": list(zip(parts, built))})


def _write_source(folder: str, name: str, target, source: str) -> None:
    """cuda.kernels_output_dir / jit(debug_root_path=): keep the generated source in `folder`."""
    import os
    os.makedirs(folder, exist_ok=True)
    ext = "cu" if target.kind == "cuda" else "cpp"
    with open(os.path.join(folder, f"{name}.{ext}"), "w") as f:
        f.write(source)
